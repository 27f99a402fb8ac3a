//go:build linux

package main_test

// Tests of what a job can reach of the runner's secrets: the token in its
// state file, the join token in its environment or a file, and whatever
// else its environment holds.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// secretInEnv is in the runner's environment, and not in -job-env.
const secretInEnv = "SECRET_IN_RUNNER=hunter2"

// probeJob is a job that tries every way to the runner's secrets that the
// files named in paths could give: the runner's environment, its working
// directory and root through /proc (its pid is $PPID: the job's shell is
// the runner's child), the working directory of the job's keeper (its
// pid is the job's process group, $KEEPER), and the paths themselves. It
// prints its uid and $KEEPER, then one line per try: "read PATH BASE64" with what it read base64-encoded,
// which no redaction of the exact token catches, or "denied PATH". Then
// whether it may attach to the runner (opening /proc/PID/mem takes what
// ptrace's attach takes) and signal it: "can attach" or "cannot attach",
// "can signal" or "cannot signal".
func probeJob(stateName string, paths ...string) string {
	tries := []string{"/proc/$PPID/environ", "/proc/$PPID/cwd/" + stateName, "/proc/$KEEPER/cwd/" + stateName}
	for _, p := range paths {
		tries = append(tries, "/proc/$PPID/root"+p, p)
	}
	return `KEEPER=$(cut -d' ' -f5 /proc/$$/stat); echo $(id -u) $KEEPER; for f in ` + strings.Join(tries, " ") + `; do ` +
		`if b=$(base64 -w0 "$f" 2>/dev/null) && [ -n "$b" ]; then echo "read $f $b"; else echo "denied $f"; fi; done; ` +
		`if ( exec 3< /proc/$PPID/mem ) 2>/dev/null; then echo can attach; else echo cannot attach; fi; ` +
		`if kill -0 $PPID 2>/dev/null; then echo can signal; else echo cannot signal; fi`
}

// A probe is what probeJob found.
type probe struct {
	uid    string
	read   map[string]string // what it read by the path it tried (with $PPID as probeJob wrote it), decoded
	denied []string
	can    map[string]bool // "attach", "signal"
}

// probed parses the output of probeJob, a job of the runner runnerPID.
func probed(t *testing.T, out string, runnerPID int) probe {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.NotEmpty(t, lines)
	first := strings.Fields(lines[0])
	require.Len(t, first, 2, "uid and keeper: %q", lines[0])
	p := probe{uid: first[0], read: map[string]string{}, can: map[string]bool{}}
	named := strings.NewReplacer("/proc/"+strconv.Itoa(runnerPID)+"/", "/proc/$PPID/", "/proc/"+first[1]+"/", "/proc/$KEEPER/")
	for _, l := range lines[1:] {
		f := strings.Fields(named.Replace(l))
		switch {
		case len(f) == 3 && f[0] == "read":
			b, err := base64.StdEncoding.DecodeString(f[2])
			require.NoError(t, err, l)
			p.read[f[1]] = string(b)
		case len(f) == 2 && f[0] == "denied":
			p.denied = append(p.denied, f[1])
		case len(f) == 2 && f[0] == "can":
			p.can[f[1]] = true
		case len(f) == 2 && f[0] == "cannot":
			p.can[f[1]] = false
		default:
			t.Fatalf("unexpected line of the probe: %q", l)
		}
	}
	require.Len(t, p.can, 2, "the probe ran to its end")
	return p
}

// sharedDir returns a new directory under the system's temporary directory
// (not under t.TempDir, which only root may enter), owned by uid and gid,
// mode 0700.
func sharedDir(t *testing.T, uid, gid int) string {
	dir, err := os.MkdirTemp("", "runner-secrets-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chown(dir, uid, gid))
	return dir
}

// nobody returns the uid and gid of the user nobody.
func nobody(t *testing.T) (uid, gid int) {
	u, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, err = strconv.Atoi(u.Uid)
	require.NoError(t, err)
	gid, err = strconv.Atoi(u.Gid)
	require.NoError(t, err)
	return uid, gid
}

// Before: a job read the runner's whole environment in
// /proc/$TERMSIG_RUNNER_PID/environ, defeating -job-env, and its token in
// /proc/$PID/cwd/runner-state.json; base64 got both past the redaction of
// the token in its output.
func TestJobCannotReadTheRunnersSecrets(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs the runner and its jobs as other users: run it as root (CI does)")
	}
	nobodyUID, nobodyGID := nobody(t)
	// The runner's binary, in a directory only root may enter, must be
	// executable by nobody.
	require.NoError(t, os.Chmod(filepath.Dir(runnerBin), 0o755))

	t.Run("jobs as the runner's user", func(t *testing.T) {
		// The runner runs as nobody, and so do its jobs: being
		// non-dumpable keeps them out of its /proc files. The state file
		// is the runner's default, in its working directory.
		e := newEnv(t)
		dir := sharedDir(t, nobodyUID, nobodyGID)
		state := filepath.Join(dir, "runner-state.json")
		e.enqueue(probeJob("runner-state.json", state))
		r := e.runnerWith(func(cmd *exec.Cmd) {
			cmd.Dir = dir
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(nobodyUID), Gid: uint32(nobodyGID)}}
		}, []string{secretInEnv, "TERMSIG_JOIN_TOKEN=" + joinToken}, "-state", "runner-state.json", "-join-token-file", "")
		r.waitLine(`job j-1 ended: exit status 0; reported`, 1)
		token := tokenIn(t, state)

		got := probed(t, e.job("j-1").Output, r.cmd.Process.Pid)
		assert.Equal(t, strconv.Itoa(nobodyUID), got.uid)
		for _, p := range []string{"/proc/$PPID/environ", "/proc/$PPID/cwd/runner-state.json", "/proc/$KEEPER/cwd/runner-state.json", "/proc/$PPID/root" + state} {
			assert.NotContains(t, got.read, p, "a job of the runner's user reads %s", p)
		}
		assert.False(t, got.can["attach"], "a job of the runner's user may ptrace it")
		// What non-dumpable cannot do: a file of the runner's user is the
		// job's too (it can chmod it), and so is the right to signal the
		// runner. That is what -user is for.
		assert.Contains(t, got.read[state], token, "a job of the runner's user reads its state file by its path")
		assert.True(t, got.can["signal"], "a job of the runner's user may signal it")
		for p, text := range got.read {
			if p != state {
				assert.NotContains(t, text, token, "the token through %s", p)
				assert.NotContains(t, text, "hunter2", "the runner's environment through %s", p)
			}
			assert.NotContains(t, text, joinToken, "the join token through %s", p)
		}

		// execve makes a process dumpable again: a re-executed runner
		// hides again. (Its /proc files are root's while it is hidden.)
		r.signal(syscall.SIGHUP)
		r.waitLine(`resumed registration r-1 after re-exec`, 1)
		fi, err := os.Stat(fmt.Sprintf("/proc/%d/environ", r.cmd.Process.Pid))
		require.NoError(t, err)
		assert.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, "owner of the re-executed runner's /proc files")
		r.signal(syscall.SIGTERM)
		assert.Equal(t, 0, r.waitExit())
	})

	t.Run("jobs as another user", func(t *testing.T) {
		// The runner runs as root and its jobs as nobody (-user): they
		// reach none of its files, nor its /proc files.
		e := newEnv(t)
		e.enqueue(probeJob("runner-state.json", e.runnerState, e.joinTokenFile()))
		r := e.runnerWith(func(cmd *exec.Cmd) { cmd.Dir = filepath.Dir(e.runnerState) },
			[]string{secretInEnv}, "-user", "nobody")
		r.waitLine(`job j-1 ended: exit status 0; reported`, 1)
		token := tokenIn(t, e.runnerState)

		got := probed(t, e.job("j-1").Output, r.cmd.Process.Pid)
		assert.Equal(t, strconv.Itoa(nobodyUID), got.uid, "the job runs as nobody")
		assert.Empty(t, got.read, "what a job of another user reads of the runner's")
		assert.Len(t, got.denied, 7)
		assert.Equal(t, map[string]bool{"attach": false, "signal": false}, got.can)
		for _, text := range got.read {
			assert.NotContains(t, text, token)
			assert.NotContains(t, text, joinToken)
			assert.NotContains(t, text, "hunter2")
		}
		r.signal(syscall.SIGTERM)
		assert.Equal(t, 0, r.waitExit())
	})
}

// tokenIn returns the token in the runner's state file at path.
func tokenIn(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var s struct{ Token string }
	require.NoError(t, json.Unmarshal(b, &s))
	require.NotEmpty(t, s.Token)
	return s.Token
}

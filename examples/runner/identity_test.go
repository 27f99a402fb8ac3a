//go:build linux

package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

// A spot instance is replaced by one with another name: nothing on the new
// host knows the old registration. Its lease lapses, the registry removes
// it and re-queues its job, and the new runner runs it.
func TestJobOfARunnerGoneForGoodIsRequeued(t *testing.T) {
	e := newEnv(t, "-lease", "1s")
	e.enqueue("sleep 30")
	old := e.runner(nil, "-name", "spot-a")
	old.waitLine(`job j-1 started`, 1)
	old.signal(syscall.SIGKILL)
	assert.Equal(t, -1, old.waitExit())

	other := filepath.Join(t.TempDir(), "runner-state.json")
	r := e.runner(nil, "-name", "spot-b", "-state", other)
	r.waitLine(`registered as r-2`, 1)
	r.waitLine(`job j-1 started`, 1)
	e.reg.waitLine(`msg="runner removed: its lease lapsed" runner=r-1`, 1)
	rs := e.runners()
	require.Len(t, rs, 1)
	assert.Equal(t, "r-2", rs[0].ID)
	j := e.job("j-1")
	assert.Equal(t, 2, j.Attempts)
	require.NotEmpty(t, j.History)
	assert.Equal(t, "the runner's lease lapsed while it ran the job", j.History[0].Reason)

	r.signal(syscall.SIGTERM)
	assert.Equal(t, 0, r.waitExit())
}

// A second host with the same name registers on its own and cannot take
// the first one's job: before tokens, it removed the first one's
// registration by name, which re-queued the job, and claimed it.
func TestSecondHostWithTheSameNameCannotTakeTheJob(t *testing.T) {
	e := newEnv(t)
	e.enqueue("sleep 30")
	first := e.runner(nil)
	pgid := startedGroup(t, first)

	second := e.runner(nil, "-state", filepath.Join(t.TempDir(), "runner-state.json"))
	second.waitLine(`registered as r-2`, 1)
	e.reg.waitLine(`path=/runners/r-2/claim status=204`, 3) // it asks, and there is nothing for it

	j := e.job("j-1")
	assert.Equal(t, registry.JobRunning, j.State)
	assert.Equal(t, "r-1", j.RunnerID)
	assert.Equal(t, 1, j.Attempts)
	assert.NotEmpty(t, liveInGroup(t, pgid), "the first host's job runs on")
	assert.Len(t, e.runners(), 2)

	for _, r := range []*proc{second, first} {
		r.signal(syscall.SIGTERM)
		assert.Equal(t, 0, r.waitExit())
	}
	assert.Empty(t, e.runners())
}

// A job gets the runner's variables named in -job-env, and its own, and
// nothing else: not the secrets in the runner's environment, nor the
// runner's token, which appears in no log either.
func TestJobEnvironmentAndTokens(t *testing.T) {
	e := newEnv(t)
	e.enqueue("env; echo end of env")
	r := e.runner([]string{"SECRET_IN_RUNNER=hunter2", "EXTRA_OK=fine"}, "-job-env", "PATH,EXTRA_OK")
	r.waitLine(`job j-1 ended: exit status 0; reported`, 1)
	out := e.job("j-1").Output
	require.Contains(t, out, "end of env")

	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	assert.Equal(t, os.Getenv("PATH"), vars["PATH"])
	assert.Equal(t, "fine", vars["EXTRA_OK"])
	assert.Equal(t, "true", vars["CI"])
	assert.Equal(t, "j-1", vars["TERMSIG_JOB_ID"])
	for _, k := range []string{"SECRET_IN_RUNNER", "AWS_EC2_METADATA_SERVICE_ENDPOINT", "NOTIFY_SOCKET", "HOME", "TERMSIG_RUNNER_ID"} {
		assert.NotContains(t, vars, k)
	}
	for k := range vars {
		switch k {
		case "PATH", "EXTRA_OK", "CI", "TERMSIG_JOB_ID", "TERMSIG_RUNNER_JOB", "TERMSIG_RUNNER_PID", "TERMSIG_JOB_MARK", "PWD":
		default:
			t.Errorf("the job got %s", k)
		}
	}

	token := runnerToken(t, e)
	r.signal(syscall.SIGHUP) // a re-exec carries the registration, not the token, in the environment
	r.waitLine(`resumed registration r-1 after re-exec`, 1)
	r.signal(syscall.SIGTERM)
	assert.Equal(t, 0, r.waitExit())
	for name, text := range map[string]string{"job output": out, "runner log": strings.Join(r.output(), "\n"), "registry log": strings.Join(e.reg.output(), "\n")} {
		assert.NotContains(t, text, token, "the runner's token in the %s", name)
		assert.NotContains(t, text, adminToken, "the admin token in the %s", name)
	}
}

// runnerToken returns the token in the runner's state file.
func runnerToken(t *testing.T, e *env) string {
	b, err := os.ReadFile(e.runnerState)
	require.NoError(t, err)
	fi, err := os.Stat(e.runnerState)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	var s struct{ Token string }
	require.NoError(t, json.Unmarshal(b, &s))
	require.NotEmpty(t, s.Token)
	return s.Token
}

// A process that left the job's process group (setsid) is killed when the
// job ends, by the marker in its environment: before, it outlived the job
// and the runner.
func TestAProcessThatLeftTheJobsGroupDiesWithTheJob(t *testing.T) {
	tests := []struct {
		name    string
		command string // writes the escaped process's pid to the FIFO %[1]s, ends once the file %[2]s exists
		stop    func(t *testing.T, r *proc)
		exit    int
	}{
		{"job ended by itself", `setsid sh -c 'echo $$ > %[1]s; exec sleep 1000' >/dev/null 2>&1 & while [ ! -e %[2]s ]; do sleep 0.01; done`,
			func(t *testing.T, r *proc) { r.waitLine(`job j-1 ended: exit status 0; reported`, 1) }, -1},
		{"drained", `setsid sh -c 'echo $$ > %[1]s; exec sleep 1000' >/dev/null 2>&1 & while [ ! -e %[2]s ]; do sleep 0.01; done; sleep 1000`,
			func(t *testing.T, r *proc) {
				r.signal(syscall.SIGTERM)
				r.waitLine(`job j-1 ended: signal: terminated`, 1)
			}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			pids, gate := fifo(t), filepath.Join(t.TempDir(), "gate")
			e.enqueue(fmt.Sprintf(tt.command, pids, gate))
			r := e.runner(nil)
			pgid := startedGroup(t, r)
			var escaped int
			_, err := fmt.Sscan(readLine(t, pids), &escaped)
			require.NoError(t, err)
			t.Cleanup(func() { _ = syscall.Kill(escaped, syscall.SIGKILL) }) // if the test fails
			require.True(t, alive(escaped))
			escapedGroup, err := syscall.Getpgid(escaped)
			require.NoError(t, err)
			require.NotEqual(t, pgid, escapedGroup, "it left the job's process group")
			require.NoError(t, os.WriteFile(gate, nil, 0o644))

			tt.stop(t, r)
			r.waitLine(fmt.Sprintf(`job j-1: killed 1 process\(es\) that had left its process group: \[%d\]`, escaped), 1)
			waitGone(t, escaped) // with the job, whether or not the runner lives on
			if tt.exit < 0 {
				r.signal(syscall.SIGTERM)
				tt.exit = 0
			}
			assert.Equal(t, tt.exit, r.waitExit())
		})
	}
}

// The shipped unit runs the jobs as a user of their own, neither root nor
// the runner's (which runs as root, so that -user works), with a state
// directory closed to them and the join token as a credential, not in the
// command line.
func TestUnitRunsJobsAsAnotherUser(t *testing.T) {
	b, err := os.ReadFile("runner.service")
	require.NoError(t, err)
	settings := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(line, "#") {
			settings[k] = v
		}
	}
	args := strings.Fields(settings["ExecStart"])
	flag := func(name string) string {
		for i, a := range args {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	user := flag("-user")
	assert.True(t, user != "" && user != "root" && user != "0", "-user %q", user)
	assert.Empty(t, settings["DynamicUser"], "-user takes a runner that runs as root")
	assert.Contains(t, []string{"", "root", "0"}, settings["User"], "-user takes a runner that runs as root")
	assert.Equal(t, "yes", settings["NoNewPrivileges"])
	assert.NotEmpty(t, settings["StateDirectory"], "somewhere for -state")
	assert.Equal(t, "0700", settings["StateDirectoryMode"])
	assert.True(t, strings.HasPrefix(settings["LoadCredential"], "join-token:"), "LoadCredential=%q", settings["LoadCredential"])
	assert.Equal(t, "%d/join-token", flag("-join-token-file"))
}

// Registering takes the registry's join token: a runner without it is
// refused, says why, and gives up at -register-timeout; with it, in the
// environment rather than a file, it registers.
func TestRegisteringTakesTheJoinToken(t *testing.T) {
	e := newEnv(t)
	r := e.runner(nil, "-join-token-file", "", "-register-timeout", "300ms")
	r.waitLine(`registering failed: .*401.*join token`, 1)
	assert.Equal(t, 1, r.waitExit())
	assert.Empty(t, e.runners())

	r = e.runner([]string{"TERMSIG_JOIN_TOKEN=" + joinToken}, "-join-token-file", "")
	r.waitLine(`registered as r-1`, 1)
	r.signal(syscall.SIGTERM)
	assert.Equal(t, 0, r.waitExit())
}

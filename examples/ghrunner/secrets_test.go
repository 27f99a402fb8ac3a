//go:build unix

package main

// Tests of the API token stays with ghrunner: not in the runner's
// environment, not readable by its jobs.

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
	"github.com/termsig/termsig/examples/ghrunner/internal/supervisor"
)

func TestTokenNeverReachesTheRunner(t *testing.T) {
	w := newWorld(t, 0)
	p, _, _ := w.startWithJob()
	if runtime.GOOS == "linux" {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.runShPids()[0]))
		require.NoError(t, err)
		assert.NotContains(t, string(env), tokenEnv+"=")
		assert.NotContains(t, string(env), testToken)
	}
	p.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitOK, p.exit())
	assert.NotContains(t, p.stderr.String(), testToken)
	assert.NotContains(t, p.stdout.String(), testToken)
}

// With -user, run.sh (so every job) runs as that user, without the token
// in its environment, and cannot read ghrunner's: the token stays with
// ghrunner, which runs as root.
func TestUserKeepsTheTokenFromTheJobs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test starts the runner as another user: run it as root (CI does)")
	}
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	w := newWorld(t, 0)
	// A runner directory nobody can use, with the fake runner's binary in it.
	dir, err := os.MkdirTemp("", "ghrunner-user")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe, err := os.Executable()
	require.NoError(t, err)
	copyFile(t, exe, filepath.Join(dir, "fake-runner"))
	require.NoError(t, ghfake.WriteRunnerDir(dir, filepath.Join(dir, "fake-runner")))
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	require.NoError(t, filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(path, uid, gid)
		}
		return err
	}))
	require.NoError(t, os.Chmod(dir, 0o755))

	p := w.start("-runner-dir", dir, "-user", "nobody")
	w.onlineRunner("spot-1")
	pid := p.runShPids()[0]
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^Uid:\s+`+nobody.Uid+`\s`, string(status), "run.sh runs as nobody")
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	assert.NotContains(t, string(env), testToken)
	assert.Contains(t, string(env), "USER=nobody")

	// What a job of nobody's can read of ghrunner's environment: nothing.
	cat := exec.Command("cat", fmt.Sprintf("/proc/%d/environ", p.cmd.Process.Pid))
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cat.CombinedOutput()
	assert.Error(t, err, "nobody reads ghrunner's environment: %s", out)
	assert.NotContains(t, string(out), testToken)

	p.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitOK, p.exit())
}

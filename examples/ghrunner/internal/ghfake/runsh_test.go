//go:build unix

package ghfake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runnerDir writes the fake runner, running this test binary, into a new
// directory.
func runnerDir(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, WriteRunnerDir(dir, exe))
	return dir
}

// A script is config.sh or run.sh running in a process group of its own.
type script struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  *lineBuffer
	done chan struct{}
	err  error
}

// startScript starts dir/name with args, from another directory, as a
// supervisor would.
func startScript(t *testing.T, dir, name string, args ...string) *script {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, name), args...)
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sc := &script{t: t, cmd: cmd, out: newLineBuffer(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = sc.out, sc.out
	require.NoError(t, cmd.Start())
	go func() {
		defer close(sc.done)
		sc.err = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-sc.done
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, sc.out)
		}
	})
	return sc
}

// exit waits for the script to exit and returns its status.
func (sc *script) exit() int {
	sc.t.Helper()
	select {
	case <-sc.done:
	case <-time.After(wait):
		sc.t.Fatalf("not exited after %v; output:\n%s", wait, sc.out)
	}
	var ee *exec.ExitError
	if errors.As(sc.err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(sc.t, sc.err)
	return 0
}

// group signals the script's process group.
func (sc *script) group(sig syscall.Signal) {
	sc.t.Helper()
	require.NoError(sc.t, syscall.Kill(-sc.cmd.Process.Pid, sig))
}

func TestFakeRunnerEndToEnd(t *testing.T) {
	s := start(t, Config{})
	dir := runnerDir(t)
	cfg := startScript(t, dir, "config.sh", "--unattended", "--url", s.URL()+"/acme/app",
		"--token", registrationToken(t, s, "acme/app"), "--name", "spot-1", "--labels", "gpu", "--work", "_work")
	require.Equal(t, 0, cfg.exit(), cfg.out.String())
	assert.Contains(t, cfg.out.String(), "√ Settings Saved.")
	rs := s.Runners()
	require.Len(t, rs, 1)
	id := rs[0].ID

	run := startScript(t, dir, "run.sh")
	run.out.await(t, "Listening for Jobs")
	r, _ := s.Runner(id)
	assert.True(t, r.Online)
	runID := s.AddRun("acme/app", RunSpec{Name: "CI", Jobs: []JobSpec{{Name: "build", Labels: []string{"gpu"}}}})
	run.out.await(t, "Running job: build")
	await(t, s, "the job on the runner", jobOn(s, runID, id))

	_, err := client(t, s, testToken).Actions.CancelWorkflowRunByID(context.Background(), "acme", "app", runID)
	var accepted *github.AcceptedError
	require.ErrorAs(t, err, &accepted)
	run.out.await(t, "Job build completed with result: Canceled")
	got, _ := s.Run(runID)
	assert.Equal(t, ConclusionCancelled, got.Conclusion)

	run.group(syscall.SIGINT)
	assert.Equal(t, 0, run.exit())
	assert.Regexp(t, `Exiting...\nRunner listener exit with 0 return code, stop the service, no retry needed.\nExiting runner...\n$`, run.out.String())
	r, ok := s.Runner(id)
	require.True(t, ok, "stopping keeps the registration")
	assert.False(t, r.Online || r.Busy || r.Connected)

	again := startScript(t, dir, "config.sh", "--unattended", "--url", s.URL()+"/acme/app", "--token", "X", "--name", "spot-1")
	assert.Equal(t, 1, again.exit())
	assert.Contains(t, again.out.String(), "Cannot configure the runner because it is already configured.")
}

func TestRunShKilledMidJob(t *testing.T) {
	s := start(t, Config{})
	dir := runnerDir(t)
	cfg := startScript(t, dir, "config.sh", "--unattended", "--url", s.URL()+"/acme",
		"--token", registrationToken(t, s, "acme"), "--name", "spot-1", "--ephemeral")
	require.Equal(t, 0, cfg.exit(), cfg.out.String())
	id := s.Runners()[0].ID
	run := startScript(t, dir, "run.sh")
	runID := s.AddRun("acme/lib", RunSpec{})
	run.out.await(t, "Running job: build")

	run.group(syscall.SIGKILL)
	assert.Equal(t, -1, run.exit(), "killed")
	await(t, s, "the runner offline", func() bool { r, _ := s.Runner(id); return !r.Online })
	r, _ := s.Runner(id)
	assert.True(t, r.Busy, "busy until GitHub gives up on it")
	got, _ := s.Run(runID)
	assert.Equal(t, StatusInProgress, got.Status)

	s.LoseRunner(id)
	got, _ = s.Run(runID)
	assert.Equal(t, ConclusionFailure, got.Conclusion)
	assert.Equal(t, []string{LostMessage("spot-1")}, got.Jobs[0].Annotations)
}

func TestRunShWithoutConfig(t *testing.T) {
	run := startScript(t, runnerDir(t), "run.sh")
	assert.Equal(t, 0, run.exit(), "run.sh exits 0 whatever the listener's status")
	assert.Equal(t, notConfigured+"\n"+
		"Runner listener exit with terminated error, stop the service, no retry needed.\n"+
		"Exiting runner...\n", run.out.String())
}

// stubListener writes the fake runner into a new directory with, in place
// of the test binary, a script that exits with each of codes in turn, one
// per run, and returns the directory.
func stubListener(t *testing.T, codes ...int) string {
	t.Helper()
	dir := t.TempDir()
	var list []string
	for _, c := range codes {
		list = append(list, strconv.Itoa(c))
	}
	stub := filepath.Join(dir, "stub-listener")
	text := "#!/bin/bash\ncodes=(" + strings.Join(list, " ") + ")\n" +
		"n=$(cat runs 2>/dev/null || echo 0)\necho $((n+1)) > runs\nexit ${codes[$n]}\n"
	require.NoError(t, os.WriteFile(stub, []byte(text), 0o755))
	require.NoError(t, WriteRunnerDir(dir, stub))
	return dir
}

func TestRunHelperStatuses(t *testing.T) {
	const stop = "Exiting runner...\n"
	for _, tc := range []struct {
		codes []int
		want  string
	}{
		{[]int{0}, "Runner listener exit with 0 return code, stop the service, no retry needed.\n" + stop},
		{[]int{1}, "Runner listener exit with terminated error, stop the service, no retry needed.\n" + stop},
		{[]int{5}, "Runner listener exit with Session Conflict error, stop the service, no retry needed.\n" + stop},
		{[]int{7}, "Exiting with unknown error code: 7\n" + stop},
		{[]int{2, 3, 4, 1}, "Runner listener exit with retryable error, re-launch runner in 5 seconds.\nRestarting runner...\n" +
			"Runner listener exit because of updating, re-launch runner after successful update\nRestarting runner...\n" +
			"Runner listener exit because of updating, re-launch runner after successful update\nRestarting runner...\n" +
			"Runner listener exit with terminated error, stop the service, no retry needed.\n" + stop},
	} {
		t.Run(fmt.Sprint(tc.codes), func(t *testing.T) {
			run := startScript(t, stubListener(t, tc.codes...), "run.sh")
			assert.Equal(t, 0, run.exit())
			assert.Equal(t, tc.want, run.out.String())
		})
	}
	t.Run("run-helper.sh alone", func(t *testing.T) {
		dir := stubListener(t, 2, 1)
		assert.Equal(t, 2, startScript(t, dir, "run-helper.sh").exit(), "a restart asked for")
		assert.Equal(t, 0, startScript(t, dir, "run-helper.sh").exit())
	})
}

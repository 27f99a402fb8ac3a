//go:build linux

package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

// A job that finishes its work during the drain's grace period (here it
// ignores SIGTERM and ends once the test lets it) reports its own result:
// it is not re-queued to run a second time.
func TestJobThatSucceedsDuringTheGracePeriodIsReported(t *testing.T) {
	e := newEnv(t)
	ready, gate := fifo(t), filepath.Join(t.TempDir(), "gate")
	e.enqueue(fmt.Sprintf(`trap "" TERM; echo trapped > %s; while [ ! -e %s ]; do sleep 0.01; done; echo done`, ready, gate))
	r := e.runner(nil, "-grace", "30s", "-stop-timeout", "60s")
	r.waitLine(`job j-1 started`, 1)
	readLine(t, ready)
	r.signal(syscall.SIGTERM)
	r.waitLine(`sent SIGTERM to job j-1`, 1)
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	r.waitLine(`job j-1 succeeded during the grace period: reporting it, not re-queueing it`, 1)
	r.waitLine(`job j-1 reported: exit status 0`, 1)
	assert.Equal(t, 0, r.waitExit())

	j := e.job("j-1")
	assert.Equal(t, registry.JobSucceeded, j.State, "reported, not re-queued")
	assert.Equal(t, 1, j.Attempts)
	assert.Contains(t, j.Output, "done")
	assert.Empty(t, e.runners())
}

// A job that ends while the registry is down, on a runner that is then
// killed before the registry comes back: its result waits in the state
// file, and the next start reports it, so the job is not run again.
func TestResultWaitingForADownRegistryIsReportedByTheNextStart(t *testing.T) {
	e := newEnv(t)
	gate := filepath.Join(t.TempDir(), "gate")
	e.enqueue(fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.01; done; echo finished`, gate))
	r := e.runner(nil)
	r.waitLine(`job j-1 started`, 1)
	e.reg.signal(syscall.SIGKILL)
	e.reg.waitExit()
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	r.waitLine(`job j-1 ended: exit status 0; reporting it failed`, 1)
	r.signal(syscall.SIGKILL)
	assert.Equal(t, -1, r.waitExit())

	e.startRegistry(e.url[len("http://"):])
	r2 := e.runner(nil)
	r2.waitLine(`delivered the result of job j-1 \(exit status 0\), left by an earlier run`, 1)
	r2.waitLine(`removed stale registration r-1`, 1)
	r2.waitLine(`registered as r-2`, 1)
	j := e.job("j-1")
	assert.Equal(t, registry.JobSucceeded, j.State)
	assert.Equal(t, 1, j.Attempts, "run once")
	assert.Contains(t, j.Output, "finished")
	r2.signal(syscall.SIGTERM)
	assert.Equal(t, 0, r2.waitExit())
	assert.Empty(t, e.runners())
}

// A metadata service that answers with a deadline in the year 9999: the
// drain takes -stop-timeout instead, and tells systemd a sane, positive
// extension (it overflowed to a negative number).
func TestFarDeadlineIsCapped(t *testing.T) {
	sock, next := notifySocket(t)
	e := newEnv(t)
	e.enqueue("sleep 30")
	r := e.runner([]string{"NOTIFY_SOCKET=" + sock}, "-stop-timeout", "3s")
	assert.Equal(t, "READY=1", next())
	r.waitLine(`job j-1 started`, 1)
	e.imds.SetInterruption("terminate", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	r.waitLine(`the notice's deadline 9999-12-31T23:59:59Z is further than -stop-timeout \(3s\): using that`, 1)
	assert.Equal(t, "STOPPING=1", next())
	m := regexp.MustCompile(`^EXTEND_TIMEOUT_USEC=(\d+)$`).FindStringSubmatch(next())
	require.NotNil(t, m)
	usec, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	assert.Positive(t, usec)
	assert.LessOrEqual(t, usec, (8 * time.Second).Microseconds(), "-stop-timeout plus 5 s at most")
	assert.Equal(t, 0, r.waitExit())
	assert.Equal(t, registry.JobQueued, e.job("j-1").State)
}

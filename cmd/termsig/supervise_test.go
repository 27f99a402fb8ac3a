//go:build linux

package main

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeadlineAlreadyPastStillLeavesAMoment(t *testing.T) {
	srv, env := imdsEnv(t)
	r := start(t, append(env, childOn, "TERMSIG_TEST_ON_TERM=ignore"),
		append([]string{"supervise", "--sources", "imds", "--imds-interval", "20ms", "--grace", "500ms"}, child()...)...)
	r.expect("ready")
	srv.SetInterruption("terminate", time.Now().Add(-10*time.Second))
	got, err := strconv.ParseInt(r.expect("at SIGTERM"), 10, 64)
	require.NoError(t, err)
	assert.Equal(t, 137, r.wait())
	assert.GreaterOrEqual(t, time.Since(time.Unix(0, got)), 400*time.Millisecond, "SIGKILL came at once")
	assert.Contains(t, r.stderr.String(), "the command gets a moment anyway")
}

func TestAStoppedCommandStillGetsItsSIGTERM(t *testing.T) {
	r := start(t, []string{childOn}, append([]string{"supervise", "--sources", "signal"}, child()...)...)
	pid, err := strconv.Atoi(r.expect("ready"))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	r.signal(syscall.SIGTERM)
	assert.Equal(t, "SIGTERM", r.expect("signal"), "SIGCONT follows the forwarded SIGTERM")
	assert.Equal(t, 0, r.wait())
}

func TestSystemdIsToldReadyThenStoppingAndTheTimeLeft(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	require.NoError(t, err)
	defer conn.Close()
	msgs := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func() string {
		select {
		case m := <-msgs:
			return m
		case <-time.After(wait):
			t.Fatal("no notification")
		}
		return ""
	}

	srv, env := imdsEnv(t)
	r := start(t, append(env, childOn, "NOTIFY_SOCKET="+sock),
		append([]string{"supervise", "--sources", "imds", "--imds-interval", "20ms", "--margin", "1s"}, child()...)...)
	assert.Equal(t, `""`, r.expect("notify-socket"), "the command does not get termsig's NOTIFY_SOCKET")
	assert.Equal(t, "READY=1", next())
	r.expect("ready")
	deadline := time.Now().Add(30 * time.Second).Truncate(time.Second)
	srv.SetInterruption("terminate", deadline)
	assert.Equal(t, "STOPPING=1", next())
	ext := next()
	usec, err := strconv.ParseInt(strings.TrimPrefix(ext, "EXTEND_TIMEOUT_USEC="), 10, 64)
	require.NoError(t, err, ext)
	// Until the kill time (deadline - margin), plus extendEvery.
	want := time.Until(deadline) - time.Second + extendEvery
	assert.InDelta(t, want.Seconds(), (time.Duration(usec) * time.Microsecond).Seconds(), 1.5)
	assert.Equal(t, "SIGTERM", r.expect("signal"))
	assert.Equal(t, 0, r.wait())
}

func TestNoticeKillsWhatTheCommandLeftInItsGroupWhenItExits(t *testing.T) {
	srv, env := imdsEnv(t)
	r := start(t, append(env, childOn, "TERMSIG_TEST_GRANDCHILD=1"),
		append([]string{"supervise", "--sources", "imds", "--imds-interval", "20ms"}, child()...)...)
	grandchild, err := strconv.Atoi(r.expect("grandchild"))
	require.NoError(t, err)
	r.expect("ready")
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	assert.Equal(t, "SIGTERM", r.expect("signal"))
	assert.Equal(t, 0, r.wait(), "the command exited 0 on SIGTERM")
	gone(t, grandchild, time.Second)
	assert.Contains(t, r.stderr.String(), "SIGKILL to what it left in its process group")
}

func TestAFarDeadlineIsCappedAtMaxDrain(t *testing.T) {
	srv, env := imdsEnv(t)
	r := start(t, append(env, childOn, "TERMSIG_TEST_ON_TERM=ignore"),
		append([]string{"supervise", "--sources", "imds", "--imds-interval", "20ms", "--grace", "1h", "--max-drain", "500ms"}, child()...)...)
	r.expect("ready")
	srv.SetInterruption("terminate", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	got, err := strconv.ParseInt(r.expect("at SIGTERM"), 10, 64)
	require.NoError(t, err)
	assert.Equal(t, 137, r.wait(), "SIGKILLed at the cap")
	took := time.Since(time.Unix(0, got))
	assert.GreaterOrEqual(t, took, 400*time.Millisecond, "SIGKILL before the cap")
	assert.Contains(t, r.stderr.String(), "the deadline is further than --max-drain")
}

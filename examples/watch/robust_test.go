//go:build linux

package main

import (
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds/imdstest"
)

func TestKindsFilterDoesNotMakeWatchDeafToSIGTERM(t *testing.T) {
	for _, mode := range [][]string{{}, {"--exec", "true"}} {
		args := append([]string{"--sources", "signal", "--kinds", "maintenance"}, mode...)
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := start(t, nil, args...)
			waitLog(t, r, "watch: watching", "") // the Notifier started
			r.signal(syscall.SIGTERM)
			assert.Equal(t, 0, r.wait())
		})
	}
}

func TestHookLeavingABackgroundProcessIsNotAFailure(t *testing.T) {
	r := start(t, nil, "--sources", "signal", "--exec", "echo hi; sleep 100 &")
	waitLog(t, r, "watch: watching", "")
	r.signal(syscall.SIGTERM)
	assert.Equal(t, 0, r.wait())
	assert.Contains(t, r.stderr.String(), "it left a background process, killed")
}

func TestAdviceHookTimesOutAfterGraceNotAtItsFarDeadline(t *testing.T) {
	srv, env := imdsEnv(t)
	srv.SetScheduledEvents(imdstest.ScheduledEvent{
		Code: "system-reboot", EventID: "instance-event-1", State: "active",
		NotBefore: time.Now().Add(14 * 24 * time.Hour),
	})
	r := start(t, env, "--sources", "imds,signal", "--follow", "--grace", "300ms",
		"--exec", `if [ "$TERMSIG_SOURCE" = imds ]; then exec sleep 1000; fi`)
	waitLog(t, r, "hook killed at its timeout", "")
	r.signal(syscall.SIGTERM)
	assert.Equal(t, 1, r.wait(), "the advice hook failed; watch ended on SIGTERM")
}

func TestManyNoticesOfOneEventDoNotQueueUp(t *testing.T) {
	// The hook runner itself: signals sent in a burst are merged by the
	// kernel, so a burst of SIGHUPs cannot make the backlog.
	var logs syncBuffer
	h := &hookRunner{
		o:      &options{exec: "sleep 0.2", grace: wait},
		log:    slog.New(slog.NewTextHandler(&logs, nil)),
		queues: map[eventKey]*hookQueue{},
	}
	start := time.Now()
	for i := range 20 {
		h.enqueue(termsig.Notice{Source: "signal", Kind: termsig.Reload, Event: "SIGHUP", Reason: strconv.Itoa(i)}, false)
	}
	h.enqueue(termsig.Notice{Source: "signal", Kind: termsig.Terminate, Event: "SIGTERM"}, true)
	h.wg.Wait()
	took := time.Since(start)
	done := strings.Count(logs.String(), "watch: hook done")
	assert.LessOrEqual(t, done, 3, "the first SIGHUP, at most the latest one, and SIGTERM")
	assert.Contains(t, logs.String(), "replaces a hook not yet started")
	assert.Less(t, took, 2*time.Second, "twenty queued hooks would take 4 s")
	assert.False(t, h.failed())
}

func TestDeadlineAlreadyPastStillLeavesAMoment(t *testing.T) {
	srv, env := imdsEnv(t)
	r := start(t, append(env, childOn, "WATCH_TEST_ON_TERM=ignore"),
		append([]string{"--sources", "imds", "--imds-interval", "20ms", "--grace", "500ms"}, child()...)...)
	r.expect("ready")
	srv.SetInterruption("terminate", time.Now().Add(-10*time.Second))
	got, err := strconv.ParseInt(r.expect("at SIGTERM"), 10, 64)
	require.NoError(t, err)
	assert.Equal(t, 137, r.wait())
	assert.GreaterOrEqual(t, time.Since(time.Unix(0, got)), 400*time.Millisecond, "SIGKILL came at once")
	assert.Contains(t, r.stderr.String(), "the command gets a moment anyway")
}

func TestAStoppedCommandStillGetsItsSIGTERM(t *testing.T) {
	r := start(t, []string{childOn}, append([]string{"--sources", "signal"}, child()...)...)
	pid, err := strconv.Atoi(r.expect("ready"))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	r.signal(syscall.SIGTERM)
	assert.Equal(t, "SIGTERM", r.expect("signal"), "SIGCONT follows the forwarded SIGTERM")
	assert.Equal(t, 0, r.wait())
}

func TestNothingToWatchIsAnError(t *testing.T) {
	r := start(t, []string{"GCE_METADATA_HOST="}, "--sources", "gcemeta")
	assert.Equal(t, 1, r.wait())
	assert.Contains(t, r.stderr.String(), "no source can work here")
}

func TestNoCommandAfterDashes(t *testing.T) {
	for _, args := range [][]string{{"--sources", "signal", "--"}, {"--", ""}} {
		r := start(t, nil, args...)
		assert.Equal(t, 2, r.wait(), args)
		assert.Contains(t, r.stderr.String(), "usage: watch")
	}
}

func TestSystemdNotifications(t *testing.T) {
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
		append([]string{"--sources", "imds", "--imds-interval", "20ms", "--margin", "1s"}, child()...)...)
	assert.Equal(t, `""`, r.expect("notify-socket"), "the command does not get watch's NOTIFY_SOCKET")
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

// waitLog waits until watch's log has a line containing want (and, if
// also is not empty, that too).
func waitLog(t *testing.T, r *run, want, also string) {
	t.Helper()
	deadline := time.After(wait)
	for {
		changed := r.stderr.next()
		for _, l := range strings.Split(r.stderr.String(), "\n") {
			if strings.Contains(l, want) && strings.Contains(l, also) {
				return
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("watch never logged %q; its log:\n%s", want, r.stderr.String())
		}
	}
}

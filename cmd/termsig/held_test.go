//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/termsigtest"
)

// These tests run supervise, runHooks and printNotices in the test
// process, on termsigtest.Fake sources, which no termsig binary can
// watch. The supervised command is still this test binary (childMain).

// superviseHere runs supervise with args (flags; the command is child())
// on srcs, as the binary would; env (NAME=VALUE) is set for the command,
// through the test's environment. It returns a run whose wait, expect and
// stderr (termsig's log, at level Debug) work as for a binary.
func superviseHere(t *testing.T, env, args []string, srcs ...termsig.Source) *run {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "child.log")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Setenv("TERMSIG_TEST_LOG", fifo)
	t.Setenv(childEnv, "1")
	t.Setenv("NOTIFY_SOCKET", "")
	// A child built with -race sleeps a second as it exits, unless told.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	o, err := parseFlags(modeSupervise, append(args, child()...), io.Discard, io.Discard)
	require.NoError(t, err)
	r := &run{t: t, stderr: &syncBuffer{}, stdout: &syncBuffer{}, lines: make(chan string, 64), exited: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(r.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	go func() {
		r.status = supervise(o, srcs, log, nil)
		close(r.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			if r.childPid > 0 {
				_ = syscall.Kill(-r.childPid, syscall.SIGKILL)
			}
			<-r.exited
		}
		f.Close()
		<-read
		if t.Failed() {
			t.Logf("termsig's log:\n%s", r.stderr.String())
		}
	})
	return r
}

// until returns the child's lines up to the first that starts with
// prefix, which it leaves out.
func (r *run) until(prefix string) []string {
	r.t.Helper()
	var got []string
	timeout := time.After(wait)
	for {
		select {
		case l := <-r.lines:
			if strings.HasPrefix(l, prefix) {
				return got
			}
			got = append(got, l)
		case <-timeout:
			r.t.Fatalf("the child never reported %q; it said %q", prefix, got)
		}
	}
}

// delivered waits until a notice that Fake.Send queued is on C.
func delivered(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(wait):
		t.Fatal("the notice was never delivered")
	}
}

// waitLogs waits until termsig's log has n lines containing want.
func waitLogs(t *testing.T, log *syncBuffer, want string, n int) {
	t.Helper()
	deadline := time.After(wait)
	for {
		changed := log.next()
		if strings.Count(log.String(), want) >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("termsig never logged %q %d times; its log:\n%s", want, n, log.String())
		}
	}
}

// held is a held termination of an Auto Scaling group, until deadline.
func held(deadline time.Time) termsig.Notice {
	return termsig.Notice{
		Kind: termsig.Terminate, Event: "lifecycle/terminating", Reason: "auto scaling: scale-in, held",
		Deadline: deadline, Held: true, HoldLimit: deadline.Add(48 * time.Hour),
	}
}

func TestHeldTerminationSendsTheFinishSignalOnceThenReleasesOnExit(t *testing.T) {
	asg := termsigtest.NewFake("asg")
	r := superviseHere(t, []string{"TERMSIG_TEST_EXIT_ON=SIGUSR1"}, []string{"--finish-signal", "QUIT", "--max-hold", "3h"}, asg)
	pid, err := strconv.Atoi(r.expect("ready"))
	require.NoError(t, err)
	first := time.Now().Add(time.Hour)
	delivered(t, asg.Send(held(first)))
	assert.Equal(t, "SIGQUIT", r.expect("signal"), "--finish-signal")

	// The source extends the hold twice while the command finishes.
	latest := first
	for i := range 2 {
		latest = latest.Add(10 * time.Minute)
		delivered(t, asg.Send(held(latest)))
		waitLogs(t, r.stderr, "the hold moved", i+1)
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGUSR1)) // the command is done
	said := r.until("exiting")
	assert.NotContains(t, said, "signal SIGQUIT", "one finish signal, not one per held notice")
	assert.NotContains(t, said, "signal SIGTERM", "never stopped")
	assert.Equal(t, 0, r.wait())

	rel := asg.Released()
	require.Len(t, rel, 1, "released once, after the command exited")
	assert.True(t, rel[0].Held)
	assert.True(t, latest.Equal(rel[0].Deadline), "with the latest held notice")
	log := r.stderr.String()
	assert.Less(t, strings.Index(log, "command exited"), strings.Index(log, "released the hold"), "released after the exit")
}

func TestHoldMovedLaterIsWaitedOutBeforeTheStopSignal(t *testing.T) {
	asg := termsigtest.NewFake("asg")
	r := superviseHere(t, nil, []string{"--finish-signal", "QUIT", "--margin", "1s"}, asg)
	r.expect("ready")
	// The wait would end 1 s from now; the move gives it 2.5 s.
	firstEnd := time.Now().Add(time.Second)
	delivered(t, asg.Send(held(firstEnd.Add(time.Second))))
	assert.Equal(t, "SIGQUIT", r.expect("signal"))
	movedEnd := time.Now().Add(2500 * time.Millisecond)
	delivered(t, asg.Send(held(movedEnd.Add(time.Second))))

	at, err := strconv.ParseInt(r.expect("at SIGTERM"), 10, 64)
	require.NoError(t, err)
	assert.Equal(t, 0, r.wait(), "the command exits on the stop signal")
	stopped := time.Unix(0, at)
	assert.False(t, stopped.Before(movedEnd), "stopped %v before the moved end: the move did not extend the wait", movedEnd.Sub(stopped))
	assert.Contains(t, r.stderr.String(), "the hold moved")
	assert.Len(t, asg.Released(), 1)
}

func TestHardNoticeDuringAHoldStopsTheCommandAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		hard func(asg, imds *termsigtest.Fake) <-chan struct{}
		log  string
	}{
		{"a spot interruption", func(_, imds *termsigtest.Fake) <-chan struct{} {
			return imds.Send(termsig.Notice{Kind: termsig.Terminate, Event: "spot/instance-action", Deadline: time.Now().Add(2 * time.Minute)})
		}, "a hard notice during the hold: stopping the command"},
		{"the hold lapses", func(asg, _ *termsigtest.Fake) <-chan struct{} {
			lapsed := held(time.Now().Add(2 * time.Minute))
			lapsed.Held, lapsed.HoldLimit = false, time.Time{}
			return asg.Send(lapsed)
		}, "the hold is over before the command exited: stopping it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asg, imds := termsigtest.NewFake("asg"), termsigtest.NewFake("imds")
			r := superviseHere(t, nil, []string{"--finish-signal", "QUIT"}, asg, imds)
			r.expect("ready")
			delivered(t, asg.Send(held(time.Now().Add(time.Hour))))
			assert.Equal(t, "SIGQUIT", r.expect("signal"))
			delivered(t, tc.hard(asg, imds))
			assert.Equal(t, "SIGTERM", r.expect("signal"), "--signal at once, not at the hold's end an hour away")
			assert.Equal(t, 0, r.wait())
			assert.Contains(t, r.stderr.String(), tc.log)
			assert.Len(t, asg.Released(), 1, "the hold is released once the command has exited")
			assert.Empty(t, imds.Released(), "a hard notice is not released, as before")
		})
	}
}

func TestHoldEndWithTheCommandStillRunningStopsIt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		deadline time.Duration // from now
		onTerm   string
		signals  []string // what the command gets
		status   int
		log      string
	}{
		{
			name: "at its deadline minus --margin", args: []string{"--finish-signal", "QUIT", "--margin", "1s"},
			deadline: 1500 * time.Millisecond, onTerm: "ignore", signals: []string{"SIGQUIT", "SIGTERM"}, status: 137,
			log: "the hold's end (its deadline minus --margin), and the command still runs: stopping it",
		},
		{
			name: "at --max-hold", args: []string{"--finish-signal", "QUIT", "--max-hold", "300ms"},
			deadline: time.Hour, onTerm: "exit", signals: []string{"SIGQUIT", "SIGTERM"}, status: 0,
			log: "the hold's end (--max-hold), and the command still runs: stopping it",
		},
		{
			name: "the finish signal being --signal, it is not sent again", args: []string{"--max-hold", "300ms", "--max-drain", "500ms"},
			deadline: time.Hour, onTerm: "ignore", signals: []string{"SIGTERM"}, status: 137,
			log: "imminent notice; the command was already asked to stop",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asg := termsigtest.NewFake("asg")
			r := superviseHere(t, []string{"TERMSIG_TEST_ON_TERM=" + tc.onTerm}, tc.args, asg)
			r.expect("ready")
			delivered(t, asg.Send(held(time.Now().Add(tc.deadline))))
			for _, sig := range tc.signals {
				assert.Equal(t, sig, r.expect("signal"))
			}
			assert.Equal(t, tc.status, r.wait())
			assert.Contains(t, r.stderr.String(), tc.log)
			assert.Len(t, asg.Released(), 1, "released once the command is gone")
		})
	}
}

func TestHeldEventRunsItsHookOnceAndReleasesItsLatestNotice(t *testing.T) {
	dir := t.TempDir()
	runs, gate := filepath.Join(dir, "runs"), filepath.Join(dir, "gate")
	require.NoError(t, syscall.Mkfifo(gate, 0o600))
	hook := `echo "$TERMSIG_EVENT held=$TERMSIG_HELD limit=$TERMSIG_HOLD_LIMIT" >> ` + runs + `; if [ "$TERMSIG_HELD" = 1 ]; then read line < ` + gate + `; fi`
	o, err := parseFlags(modeHook, []string{"--follow", hook}, io.Discard, io.Discard)
	require.NoError(t, err)
	var logs syncBuffer
	asg := termsigtest.NewFake("asg")
	done := make(chan int, 1)
	go func() {
		done <- runHooks(o, []termsig.Source{asg}, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	}()

	first := held(time.Now().Add(time.Hour))
	asg.Send(first)
	moved := held(first.Deadline.Add(10 * time.Minute))
	asg.Send(moved)
	lapsed := moved
	lapsed.Held, lapsed.HoldLimit = false, time.Time{}
	delivered(t, asg.Send(lapsed))
	waitLogs(t, &logs, "the hold moved; its hook is not run again", 1)
	waitLogs(t, &logs, "the hold is over; its hook is not run again", 1)

	// The hook ends; then SIGTERM to termsig ends it.
	g, err := os.OpenFile(gate, os.O_RDWR, 0)
	require.NoError(t, err)
	defer g.Close()
	_, err = g.WriteString("go\n")
	require.NoError(t, err)
	waitLogs(t, &logs, "released the hold", 1)
	asg.Send(termsig.Notice{Kind: termsig.Terminate, Event: "SIGTERM", Signal: syscall.SIGTERM})
	select {
	case code := <-done:
		assert.Equal(t, exitOK, code, logs.String())
	case <-time.After(wait):
		t.Fatalf("termsig hook did not end; its log:\n%s", logs.String())
	}

	b, err := os.ReadFile(runs)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"lifecycle/terminating held=1 limit=" + first.HoldLimit.UTC().Format(time.RFC3339),
		"SIGTERM held=0 limit=",
	}, strings.Split(strings.TrimSpace(string(b)), "\n"), "one hook for the held event, none per move")
	var rel []termsig.Notice
	for _, nt := range asg.Released() {
		if nt.Event == first.Event {
			rel = append(rel, nt)
		}
	}
	require.Len(t, rel, 1)
	assert.True(t, rel[0].Held)
	assert.True(t, moved.Deadline.Equal(rel[0].Deadline), "released with the latest held notice")
}

func TestPrintWritesHeldAndHoldLimit(t *testing.T) {
	o, err := parseFlags(modePrint, nil, io.Discard, io.Discard)
	require.NoError(t, err)
	asg := termsigtest.NewFake("asg")
	nt := held(time.Now().Add(time.Hour).UTC().Truncate(time.Second))
	asg.Send(nt)
	var out bytes.Buffer
	assert.Equal(t, exitOK, printNotices(o, []termsig.Source{asg}, &out, slog.New(slog.DiscardHandler), nil), "ends after the first imminent notice")
	var got map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &got), out.String())
	assert.Equal(t, true, got["held"])
	assert.Equal(t, nt.HoldLimit.Format(time.RFC3339), got["hold_limit"])
	assert.Empty(t, asg.Released(), "print never releases: the hold runs until it lapses")
}

func TestNoticeEnvSaysWhetherTheHostIsHeld(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	nt := held(now.Add(time.Hour))
	assert.Subset(t, noticeEnv(nt, now), []string{"TERMSIG_HELD=1", "TERMSIG_HOLD_LIMIT=2026-12-04T02:00:00Z", "TERMSIG_SECONDS_LEFT=3600"})
	nt.Held, nt.HoldLimit = false, time.Time{}
	assert.Subset(t, noticeEnv(nt, now), []string{"TERMSIG_HELD=0", "TERMSIG_HOLD_LIMIT="})
}

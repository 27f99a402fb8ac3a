//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/termsigtest"
)

// These tests run the runner's loop in the test process, on a fakeService
// and termsigtest.Fake sources, with real jobs (sh -c). A job waits on a
// FIFO, the gate, until the test lets it finish.

// holdTestWait bounds every wait for something that should happen soon.
const holdTestWait = 20 * time.Second

// timelineLines is a timeline's writer whose lines a test can wait for.
type timelineLines struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
}

func (w *timelineLines) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, strings.TrimRight(string(b), "\n"))
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
	return len(b), nil
}

func (w *timelineLines) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// wait waits for a line that matches re.
func (w *timelineLines) wait(t testing.TB, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(holdTestWait)
	for {
		w.mu.Lock()
		for _, l := range w.lines {
			if rx.MatchString(l) {
				w.mu.Unlock()
				return
			}
		}
		if w.changed == nil {
			w.changed = make(chan struct{})
		}
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("no timeline line matching %q; the timeline:\n%s", re, w.String())
		}
	}
}

// gate returns a FIFO for a job to wait on (read line < gate), and a
// function that lets the job go on.
func gate(t testing.TB) (path string, open func()) {
	path = filepath.Join(t.TempDir(), "gate")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	// Read and write: the job's open does not wait for a writer, and the
	// line waits in the pipe until the job reads it.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return path, func() {
		_, err := f.WriteString("go\n")
		require.NoError(t, err)
	}
}

// heldRun is a runner running its loop on srcs.
type heldRun struct {
	svc  *fakeService
	out  *timelineLines
	done chan int
}

// runHeld starts a runner on svc and srcs, with cfg's -max-hold, -grace
// and -margin (the others are fast test settings). Each Release is
// recorded in svc's order as "release SOURCE EVENT".
func runHeld(t testing.TB, svc *fakeService, cfg config, srcs ...*termsigtest.Fake) *heldRun {
	t.Helper()
	return runHeldWith(t, svc, cfg, nil, srcs...)
}

// runHeldWith is runHeld with srv, started by the test, counting and
// posting what the runner does and watching its loop, as realMain's does.
func runHeldWith(t testing.TB, svc *fakeService, cfg config, srv *ops.Server, srcs ...*termsigtest.Fake) *heldRun {
	t.Helper()
	all := make([]termsig.Source, len(srcs))
	for i, s := range srcs {
		all[i] = s
	}
	n := termsig.New(all...)
	h := &heldRun{svc: svc, out: &timelineLines{}, done: make(chan int, 1)}
	r := &runner{
		cfg: config{
			name: "held-runner", poll: time.Hour, grace: cfg.grace, margin: cfg.margin, maxHold: cfg.maxHold,
			stopTimeout: 10 * time.Second, registerTimeout: time.Second, onAdvice: "drain",
		},
		svc:     svc,
		tl:      newTimeline(h.out),
		notices: n.C(),
		stop:    n.Stop,
		release: func(ctx context.Context, nt termsig.Notice) error {
			svc.record("release " + nt.Source + " " + nt.Event)
			return n.Release(ctx, nt)
		},
		notify: func(string) {},
		ops:    srv,
		m:      newRunnerMetrics(srv.Registerer()),
	}
	srv.Watch(n)
	srv.AddReadyCheck("registration", r.registrationReady)
	go func() { h.done <- r.run() }()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default: // a failed test: a hard notice ends the runner
			srcs[0].Send(termsig.Notice{Kind: termsig.Terminate, Event: "test-cleanup"})
			<-h.done
		}
		n.Stop()
		if t.Failed() {
			t.Logf("the timeline:\n%s", h.out.String())
		}
	})
	return h
}

func (h *heldRun) exit(t testing.TB) int {
	t.Helper()
	select {
	case code := <-h.done:
		h.done <- code // for Cleanup
		return code
	case <-time.After(holdTestWait):
		t.Fatal("the runner did not exit")
	}
	return -1
}

// heldNotice is a held termination of an Auto Scaling group, until
// deadline.
func heldNotice(deadline time.Time) termsig.Notice {
	return termsig.Notice{
		Kind: termsig.Terminate, Event: "lifecycle/terminating", Reason: "auto scaling: scale-in, held",
		Deadline: deadline, Held: true, HoldLimit: deadline.Add(48 * time.Hour),
	}
}

// sent waits until a notice that Fake.Send queued is on C.
func sent(t testing.TB, delivered <-chan struct{}) {
	t.Helper()
	select {
	case <-delivered:
	case <-time.After(holdTestWait):
		t.Fatal("the notice was never delivered")
	}
}

func TestHeldTerminationLetsTheJobFinishThenUnregistersThenReleases(t *testing.T) {
	path, finish := gate(t)
	svc := &fakeService{onClaim: func() *Job { return &Job{ID: "j-1", Command: "read line < " + path + "; echo done"} }}
	asg := termsigtest.NewFake("asg")
	h := runHeld(t, svc, config{grace: time.Second, margin: time.Second, maxHold: 3 * time.Hour}, asg)
	h.out.wait(t, `job j-1 started`)

	first := heldNotice(time.Now().Add(time.Hour))
	sent(t, asg.Send(first))
	h.out.wait(t, `held: stopped claiming jobs; job j-1 may finish until`)
	moved := heldNotice(first.Deadline.Add(time.Hour))
	sent(t, asg.Send(moved))
	h.out.wait(t, `the hold moved: .*; a job may finish until`)
	finish()

	assert.Equal(t, exitClean, h.exit(t))
	assert.Equal(t, []string{"report j-1", "remove r-1", "release asg lifecycle/terminating"}, svc.calls(),
		"the job is reported, then the runner unregisters, then the hold is released")
	assert.Empty(t, svc.requeued, "the job ran once: no re-run")
	assert.Equal(t, 1, svc.claims, "no claim under the hold")
	rel := asg.Released()
	require.Len(t, rel, 1)
	assert.True(t, moved.Deadline.Equal(rel[0].Deadline), "released with the latest held notice")
}

func TestJobStillRunningAtTheHoldsEndIsRequeued(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // from now
		maxHold  time.Duration
		why      string
	}{
		// The job is stopped -grace (1 s) before the deadline minus
		// -margin (1 s): here, 300 ms from now.
		{"its deadline minus -margin and -grace", 2300 * time.Millisecond, time.Hour, "its deadline minus -margin and -grace"},
		{"-max-hold", time.Hour, 300 * time.Millisecond, "-max-hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := gate(t) // never opened: the job runs on
			svc := &fakeService{onClaim: func() *Job { return &Job{ID: "j-1", Command: "read line < " + path} }}
			asg := termsigtest.NewFake("asg")
			h := runHeld(t, svc, config{grace: time.Second, margin: time.Second, maxHold: tc.maxHold}, asg)
			h.out.wait(t, `job j-1 started`)
			sent(t, asg.Send(heldNotice(time.Now().Add(tc.deadline))))

			assert.Equal(t, exitClean, h.exit(t))
			h.out.wait(t, regexp.QuoteMeta("the hold's end ("+tc.why+"), and job j-1 still runs: stopping it"))
			assert.Equal(t, []string{"requeue j-1", "remove r-1", "release asg lifecycle/terminating"}, svc.calls())
			assert.Len(t, asg.Released(), 1)
		})
	}
}

func TestHardNoticeDuringAHoldDrainsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hard  func(asg, imds *termsigtest.Fake) <-chan struct{}
		says  string // in the timeline
		calls []string
	}{
		{"a spot interruption", func(_, imds *termsigtest.Fake) <-chan struct{} {
			return imds.Send(termsig.Notice{Kind: termsig.Terminate, Event: "spot/instance-action", Deadline: time.Now().Add(2 * time.Minute)})
		}, `notice: imds: terminate`, []string{"requeue j-1", "remove r-1", "release asg lifecycle/terminating", "release imds spot/instance-action"}},
		{"the hold lapses", func(asg, _ *termsigtest.Fake) <-chan struct{} {
			lapsed := heldNotice(time.Now().Add(2 * time.Minute))
			lapsed.Held, lapsed.HoldLimit = false, time.Time{}
			return asg.Send(lapsed)
		}, `the hold is over \(the latest notice of its event is not held\): draining now`, []string{"requeue j-1", "remove r-1", "release asg lifecycle/terminating"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := gate(t)
			svc := &fakeService{onClaim: func() *Job { return &Job{ID: "j-1", Command: "read line < " + path} }}
			asg, imds := termsigtest.NewFake("asg"), termsigtest.NewFake("imds")
			h := runHeld(t, svc, config{grace: time.Second, margin: time.Second, maxHold: time.Hour}, asg, imds)
			h.out.wait(t, `job j-1 started`)
			sent(t, asg.Send(heldNotice(time.Now().Add(time.Hour))))
			h.out.wait(t, `held: stopped claiming jobs`)
			sent(t, tc.hard(asg, imds))

			assert.Equal(t, exitClean, h.exit(t), "at once, not at the hold's end an hour away")
			h.out.wait(t, tc.says)
			h.out.wait(t, `sent SIGTERM to job j-1`)
			assert.Equal(t, tc.calls, svc.calls())
		})
	}
}

func TestHeldTerminationWithNoJobLeavesAtOnce(t *testing.T) {
	svc := &fakeService{}
	asg := termsigtest.NewFake("asg")
	h := runHeld(t, svc, config{grace: time.Second, margin: time.Second, maxHold: time.Hour}, asg)
	h.out.wait(t, `ready: runner r-1`)
	sent(t, asg.Send(heldNotice(time.Now().Add(time.Hour))))
	assert.Equal(t, exitClean, h.exit(t))
	h.out.wait(t, `no job left to wait for under the hold: leaving`)
	assert.Equal(t, []string{"remove r-1", "release asg lifecycle/terminating"}, svc.calls())
}

func TestHoldEnd(t *testing.T) {
	from := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	r := &runner{cfg: config{grace: 30 * time.Second, margin: 10 * time.Second, maxHold: time.Hour}}
	for _, tc := range []struct {
		name      string
		deadlines []time.Duration // after from, one per event
		want      time.Duration
		capped    bool
	}{
		{"the deadline minus -margin and -grace", []time.Duration{10 * time.Minute}, 10*time.Minute - 40*time.Second, false},
		{"the earliest of two events", []time.Duration{50 * time.Minute, 20 * time.Minute}, 20*time.Minute - 40*time.Second, false},
		{"-max-hold after the first notice", []time.Duration{3 * time.Hour}, time.Hour, true},
		{"passed already", []time.Duration{20 * time.Second}, -20 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hold{from: from}
			for i, d := range tc.deadlines {
				nt := heldNotice(from.Add(d))
				nt.Event += string(rune('a' + i))
				h.keep(nt)
			}
			end, capped := r.holdEnd(h)
			assert.Equal(t, from.Add(tc.want), end)
			assert.Equal(t, tc.capped, capped)
		})
	}
}

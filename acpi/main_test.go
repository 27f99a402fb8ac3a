package acpi_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// What the Notifier logs when a source reports an error, or reports itself
// healthy again: acpi does not log its health itself.
const (
	logFailing = "termsig: source error, retrying"
	logHealthy = "termsig: source healthy again"
)

// wait bounds every wait for an event in the tests; none sleeps instead.
const wait = 5 * time.Second

func recv[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(wait):
		t.Fatal("nothing received")
	}
	var zero T
	return zero
}

// logRecorder adapts testlog.Recorder to these tests' calls.
type logRecorder struct{ *testlog.Recorder }

func newLogRecorder() *logRecorder { return &logRecorder{testlog.New()} }

func (l *logRecorder) logger() *slog.Logger { return l.Logger() }

// waitFor waits until msg has been logged at least n times and returns the
// n-th record.
func (l *logRecorder) waitFor(t testing.TB, msg string, n int) slog.Record {
	t.Helper()
	l.WaitFor(t, msg, n)
	return l.Records(msg)[n-1]
}

func (l *logRecorder) count(msg string) int { return l.Count(msg) }

// countWith counts the records with msg whose attribute err contains sub.
func (l *logRecorder) countWith(msg, sub string) int {
	n := 0
	for _, r := range l.Records(msg) {
		if strings.Contains(attr(r, "err"), sub) {
			n++
		}
	}
	return n
}

// waitForWith waits until msg has been logged at least n times with an
// attribute err that contains sub.
func (l *logRecorder) waitForWith(t testing.TB, msg, sub string, n int) {
	t.Helper()
	l.WaitUntil(t, fmt.Sprintf("%q with err %q logged %d times", msg, sub, n), func([]slog.Record) bool {
		return l.countWith(msg, sub) >= n
	})
}

// attr returns the value of the attribute key of r as a string.
func attr(r slog.Record, key string) string { return testlog.Attr(r, key) }

// A watched source runs src and keeps what its Watch returned and how
// long it took, which a Notifier does not show as such (it shows a stop
// for ctx's error).
type watched struct {
	src termsig.Source
	// doneAtStart gives Watch a ctx that is done already.
	doneAtStart bool
	ret         chan watchResult // capacity 1
}

type watchResult struct {
	err  error
	took time.Duration
}

func newWatched(src termsig.Source, doneAtStart bool) *watched {
	return &watched{src: src, doneAtStart: doneAtStart, ret: make(chan watchResult, 1)}
}

func (w *watched) Name() string { return w.src.Name() }

func (w *watched) Watch(ctx context.Context, r *termsig.Run) error {
	if w.doneAtStart {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		cancel()
	}
	start := time.Now()
	err := w.src.Watch(ctx, r)
	w.ret <- watchResult{err, time.Since(start)}
	return err
}

// watchOnce runs src under a Notifier until its Watch returns of itself,
// and returns what it returned and how long it took.
func watchOnce(t *testing.T, src termsig.Source) (time.Duration, error) {
	t.Helper()
	w := newWatched(src, false)
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(w)
	defer n.Stop()
	r := recv(t, w.ret)
	return r.took, r.err
}

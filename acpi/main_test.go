package acpi_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

// logRecorder is a slog.Handler that keeps every record and lets a test
// wait for a message without sleeping.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
	changed chan struct{}
}

func newLogRecorder() *logRecorder { return &logRecorder{changed: make(chan struct{})} }

func (l *logRecorder) logger() *slog.Logger { return slog.New(l) }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r.Clone())
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	return nil
}

// waitFor waits until msg has been logged at least n times and returns the
// n-th record.
func (l *logRecorder) waitFor(t testing.TB, msg string, n int) slog.Record {
	t.Helper()
	timeout := time.After(wait)
	for {
		l.mu.Lock()
		ch := l.changed
		found := 0
		for _, r := range l.records {
			if r.Message == msg {
				found++
				if found == n {
					l.mu.Unlock()
					return r
				}
			}
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("no log %q (%d times)", msg, n)
			return slog.Record{}
		}
	}
}

func (l *logRecorder) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := 0
	for _, r := range l.records {
		if r.Message == msg {
			c++
		}
	}
	return c
}

// attr returns the value of the attribute key of r as a string.
func attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

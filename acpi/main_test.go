package acpi_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/termsig/termsig/internal/testlog"
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

// attr returns the value of the attribute key of r as a string.
func attr(r slog.Record, key string) string { return testlog.Attr(r, key) }

package logind_test

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/logind/logindtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// What the Notifier logs when a source reports an error, or reports itself
// healthy again.
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

// startBus starts a private dbus-daemon for the test. The tests need it:
// .ci/run installs it, and a machine without it fails here saying what to
// install rather than passing without testing.
func startBus(t testing.TB) *logindtest.Bus {
	t.Helper()
	bus, err := logindtest.StartBus()
	if errors.Is(err, logindtest.ErrNoDaemon) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	return bus
}

// startLogind starts a fake logind on bus.
func startLogind(t testing.TB, bus *logindtest.Bus, c logindtest.Config) *logindtest.Logind {
	t.Helper()
	l, err := logindtest.New(bus.Address(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

var _ = testlog.New

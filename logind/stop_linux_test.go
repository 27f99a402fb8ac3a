package logind_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
)

// TestStopIsPrompt: Stop returns within 100 ms whatever the source is
// doing: listening, waiting for a consumer that does not read, backing off
// after the bus died, stuck in the handshake with a bus that does not
// answer, or stuck in a call to a logind that does not answer. Timeouts
// and backoffs are an hour, so only cancellation can end them.
func TestStopIsPrompt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setUp func(t *testing.T) (*termsig.Notifier, func())
	}{
		{"listening", func(t *testing.T) (*termsig.Notifier, func()) {
			bus := startBus(t)
			startLogind(t, bus, logindtest.Config{})
			return notifier(t, bus.Address(), nil), func() {}
		}},
		{"consumer-not-reading", func(t *testing.T) (*termsig.Notifier, func()) {
			bus := startBus(t)
			fake := startLogind(t, bus, logindtest.Config{})
			log := testlog.New()
			n := notifier(t, bus.Address(), log)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			require.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return len(all) == 1 }))
			// Buffer 1: the first notice fills C, the source waits to
			// hand over the second.
			require.NoError(t, fake.PrepareForShutdown("poweroff"))
			require.NoError(t, fake.CancelShutdown("poweroff"))
			log.WaitFor(t, "termsig: notice", 1)
			return n, func() {}
		}},
		{"backing-off", func(t *testing.T) (*termsig.Notifier, func()) {
			bus := startBus(t)
			startLogind(t, bus, logindtest.Config{})
			log := testlog.New()
			n := notifier(t, bus.Address(), log)
			require.NoError(t, bus.Kill())
			log.WaitFor(t, logFailing, 1)
			return n, func() {}
		}},
		{"handshake-hangs", func(t *testing.T) (*termsig.Notifier, func()) {
			sock := filepath.Join(t.TempDir(), "bus")
			ln, err := net.Listen("unix", sock)
			require.NoError(t, err)
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := ln.Accept()
				if err == nil {
					accepted <- c
				}
			}()
			n := notifier(t, "unix:path="+sock, nil)
			c := recv(t, accepted)
			return n, func() { c.Close(); ln.Close() }
		}},
		{"logind-hangs", func(t *testing.T) (*termsig.Notifier, func()) {
			bus := startBus(t)
			hold := make(chan struct{})
			fake, err := logindtest.New(bus.Address(), logindtest.Config{HoldInhibit: hold})
			require.NoError(t, err)
			n := notifier(t, bus.Address(), nil)
			return n, func() { close(hold); fake.Close() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
				n, cleanUp := tc.setUp(t)
				defer cleanUp()
				start := time.Now()
				n.Stop()
				return time.Since(start)
			})
		})
	}
}

// notifier runs a logind source on the bus at addr with hour-long timeouts
// and backoff, a buffer of 1, and without waiting long for readiness.
func notifier(t *testing.T, addr string, log *testlog.Recorder) *termsig.Notifier {
	t.Helper()
	if log == nil {
		log = testlog.New()
	}
	c := logind.Fast(logind.Config{Address: addr, CallTimeout: time.Hour, Logger: log.Logger()}, time.Hour, time.Hour)
	n := termsig.Config{Logger: log.Logger(), Buffer: 1, ReadyTimeout: 10 * time.Millisecond}.New(logind.New(c))
	t.Cleanup(n.Stop)
	return n
}

// newSource is a logind source on the bus at addr, logging to log.
func newSource(addr string, log *testlog.Recorder) *logind.Source {
	return logind.New(logind.Config{Address: addr, Logger: log.Logger()})
}

//go:build !windows

package signal_test

import (
	"os"
	ossignal "os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/signal"
	"github.com/termsig/termsig/termsigtest"
)

const wait = 5 * time.Second

// raise sends sig to this process until the notifier reports a notice, and
// returns it. The test keeps its own os/signal registration (guard), so the
// process survives a signal that arrives before the source has registered;
// once guard has received a signal, os/signal has also handed it to every
// channel registered at that time, so a short wait on C tells whether the
// source had registered. No sleep stands in for an event.
func raise(t *testing.T, n *termsig.Notifier, sig syscall.Signal) termsig.Notice {
	t.Helper()
	guard := make(chan os.Signal, 16)
	ossignal.Notify(guard, sig)
	defer ossignal.Stop(guard)
	deadline := time.After(wait)
	for {
		require.NoError(t, syscall.Kill(os.Getpid(), sig))
		select {
		case <-guard:
		case <-deadline:
			t.Fatalf("%v never arrived", sig)
		}
		select {
		case nt := <-n.C():
			return nt
		case <-time.After(20 * time.Millisecond):
			// The source had not registered yet: send again.
		}
	}
}

func TestSignals(t *testing.T) {
	for _, tc := range []struct {
		sig    syscall.Signal
		kind   termsig.Kind
		reason string
	}{
		{syscall.SIGTERM, termsig.Terminate, "SIGTERM"},
		{syscall.SIGINT, termsig.Interrupt, "SIGINT"},
		{syscall.SIGHUP, termsig.Reload, "SIGHUP"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			n := termsig.New(signal.New())
			defer n.Stop()
			nt := raise(t, n, tc.sig)
			assert.Equal(t, "signal", nt.Source)
			assert.Equal(t, tc.kind, nt.Kind)
			assert.Equal(t, tc.sig, nt.Signal)
			assert.Equal(t, tc.reason, nt.Reason)
			assert.Equal(t, tc.reason, nt.Event, "the event is the signal's name")
			assert.False(t, nt.Observed.IsZero())
		})
	}
}

func TestEverySignalIsItsOwnNotice(t *testing.T) {
	n := termsig.New(signal.New())
	defer n.Stop()
	first := raise(t, n, syscall.SIGINT)
	second := raise(t, n, syscall.SIGINT)
	assert.Equal(t, termsig.Interrupt, first.Kind)
	assert.Equal(t, termsig.Interrupt, second.Kind)
	assert.False(t, second.Observed.Before(first.Observed))
}

func TestNewMap(t *testing.T) {
	n := termsig.New(signal.NewMap(map[os.Signal]termsig.Kind{syscall.SIGUSR1: termsig.Reload}))
	defer n.Stop()
	nt := raise(t, n, syscall.SIGUSR1)
	assert.Equal(t, termsig.Reload, nt.Kind)
	assert.Equal(t, syscall.SIGUSR1, nt.Signal)
}

func TestOtherSignalsTerminate(t *testing.T) {
	n := termsig.New(signal.New(syscall.SIGUSR2))
	defer n.Stop()
	nt := raise(t, n, syscall.SIGUSR2)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, "SIGUSR2", nt.Reason, "named as the JSON form names it")
}

func TestNewMapMisuse(t *testing.T) {
	assert.PanicsWithValue(t, "termsig: signal.NewMap with no signals", func() { signal.NewMap(nil) })
	assert.PanicsWithValue(t, "termsig: signal.NewMap with a nil signal", func() {
		signal.NewMap(map[os.Signal]termsig.Kind{nil: termsig.Terminate})
	})
}

func TestSourceKeepsContract(t *testing.T) {
	// SIGUSR2's default action would end the test: the guard keeps it
	// from doing so between the source's Stop and the next Notify.
	guard := make(chan os.Signal, 16)
	ossignal.Notify(guard, syscall.SIGUSR2)
	defer ossignal.Stop(guard)
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		return signal.New(syscall.SIGUSR2), func() {
			require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR2))
		}
	})
}

// A signal that arrives while nobody reads C must not stop Stop.
func TestStopWhileSignalPending(t *testing.T) {
	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		n := termsig.Config{Buffer: 1}.New(signal.New())
		raise(t, n, syscall.SIGHUP)
		guard := make(chan os.Signal, 16)
		ossignal.Notify(guard, syscall.SIGHUP)
		defer ossignal.Stop(guard)
		for range 3 {
			require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
			<-guard
		}
		start := time.Now()
		n.Stop()
		return time.Since(start)
	})
}

// A signal sent the moment New returns is a notice, not the default
// action: New waits for the handler to be installed. Were it not so, this
// test binary would die of SIGTERM.
func TestSignalRightAfterNew(t *testing.T) {
	for range 20 {
		n := termsig.New(signal.New())
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
		select {
		case nt := <-n.C():
			assert.Equal(t, termsig.Terminate, nt.Kind)
		case <-time.After(wait):
			t.Fatal("no notice")
		}
		n.Stop()
	}
}

func TestSourceIsLocalAndReadyBeforeNewReturns(t *testing.T) {
	var src termsig.Source = signal.New()
	d, ok := src.(termsig.Describer)
	require.True(t, ok)
	assert.True(t, d.Traits().LocalFirstLook, "installing a handler is local: New waits for it")
	assert.True(t, d.Traits().Local, "signals concern the process, not the platform")
}

package logind_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
)

// TestShutdownRightAfterTheLockIsTaken: a reboot announced just after the
// source took its lock, but before it read PreparingForShutdown, is still a
// Reboot of "shutdown/reboot" held by the lock: the signal that came before
// the property's answer is acted on first.
func TestShutdownRightAfterTheLockIsTaken(t *testing.T) {
	bus := startBus(t)
	const trials = 20
	for i := range trials {
		fake := startLogind(t, bus, logindtest.Config{})
		src := logind.New(logind.Config{Address: bus.Address()})
		announced := make(chan struct{})
		go func() {
			defer close(announced)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			if fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return len(all) == 1 }) == nil {
				_ = fake.PrepareForShutdown("reboot")
			}
		}()
		n := termsig.Config{ReadyTimeout: time.Millisecond, Logger: slog.New(slog.DiscardHandler)}.New(src)
		nt := recv(t, n.C())
		assert.Equal(t, termsig.Reboot, nt.Kind, "trial %d: %v", i, nt)
		assert.Equal(t, "shutdown/reboot", nt.Event, "trial %d", i)
		assert.Contains(t, nt.Reason, "delay lock held", "trial %d", i)
		<-announced
		n.Stop()
		require.NoError(t, fake.Close())
	}
}

// TestUnderWayNoticeIsOnCAtReady: Notifier.Ready promises that "what the
// first looks found is on C by the time Ready is closed"; a program checks
// C after Ready before it takes its first job. The notice of a shutdown
// already under way is there.
func TestUnderWayNoticeIsOnCAtReady(t *testing.T) {
	bus := startBus(t)
	fake := startLogind(t, bus, logindtest.Config{})
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	misses := 0
	const trials = 100
	for range trials {
		n := termsig.Config{Logger: testlog.New().Logger()}.New(logind.New(logind.Config{Address: bus.Address()}))
		<-n.Ready()
		if len(n.C()) == 0 {
			misses++
		}
		n.Stop()
	}
	assert.Zero(t, misses, "Ready closed before the under-way notice was on C in %d of %d runs", misses, trials)
}

//go:build linux

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/logind/logindtest"
)

// TestHookThenRelease: with --follow, termsig goes on after the hook of a
// shutdown, so it releases logind's delay lock once the hook is over: the
// shutdown need not wait for the delay to run out.
func TestHookThenRelease(t *testing.T) {
	bus, fake := logindtest.Start(t, logindtest.Config{InhibitDelayMax: time.Minute})

	r := start(t, []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus.Address()},
		"hook", "--sources", "logind", "--follow", "sleep 0.2")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return len(all) == 1 }))

	announced := time.Now()
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	require.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return !all[0].Released.IsZero() }))
	took := fake.Inhibitors()[0].Released.Sub(announced)
	assert.GreaterOrEqual(t, took, 200*time.Millisecond, "not before the hook is over")
	select {
	case <-r.exited:
		t.Fatal("termsig print --follow ended")
	default:
	}
	t.Logf("shutdown announced → lock released after the hook: %v", took.Round(time.Millisecond))
}

func logindFake(t *testing.T) *logindtest.Logind {
	bus, fake := logindtest.Start(t, logindtest.Config{InhibitDelayMax: time.Minute})
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.Address()) // inherited by termsig
	return fake
}

// TestPrintDoesNotHold: print mode hands each notice to the reader of its
// output and has nothing to wait for, so it takes no delay lock: it never
// holds logind's shutdown until InhibitDelayMaxSec runs out, with --follow
// or without.
func TestPrintDoesNotHold(t *testing.T) {
	fake := logindFake(t)
	r := start(t, nil, "print", "--sources", "logind", "--follow")
	waitLog(t, r, "termsig: watching", "") // New has returned: the source is set up
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	waitStdout(t, r, "shutdown/poweroff")
	assert.Empty(t, fake.Inhibitors(), "no lock taken")
}

// TestFilteredOutNoticeReleases: a notice that --kinds filters out gets
// no hook: nobody is cleaning up after it, so the shutdown is not held
// for it.
func TestFilteredOutNoticeReleases(t *testing.T) {
	fake := logindFake(t)
	r := start(t, nil, "hook", "--sources", "logind", "--kinds", "terminate", "true")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return len(all) == 1 }))
	waitLog(t, r, "termsig: watching", "")                // New has returned: the source is set up
	require.NoError(t, fake.PrepareForShutdown("reboot")) // Kind Reboot: filtered out
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	assert.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return !all[0].Released.IsZero() }))
}

// waitStdout waits until termsig has printed a line containing want.
func waitStdout(t *testing.T, r *run, want string) {
	t.Helper()
	deadline := time.After(wait)
	for {
		changed := r.stdout.next()
		if strings.Contains(r.stdout.String(), want) {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("termsig never printed %q; it printed:\n%s", want, r.stdout.String())
		}
	}
}

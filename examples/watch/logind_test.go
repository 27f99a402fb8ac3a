//go:build linux

package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/logind/logindtest"
)

// TestHookThenRelease: with --follow, watch goes on after the hook of a
// shutdown, so it releases logind's delay lock once the hook is over: the
// shutdown need not wait for the delay to run out.
func TestHookThenRelease(t *testing.T) {
	bus, err := logindtest.StartBus()
	require.NoError(t, err)
	t.Cleanup(func() { bus.Close() })
	fake, err := logindtest.New(bus.Address(), logindtest.Config{InhibitDelayMax: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { fake.Close() })

	r := start(t, []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus.Address()},
		"--sources", "logind", "--follow", "--exec", "sleep 0.2")
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
		t.Fatal("watch --follow ended")
	default:
	}
	t.Logf("shutdown announced → lock released after the hook: %v", took.Round(time.Millisecond))
}

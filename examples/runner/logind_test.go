//go:build linux

package main_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
	"github.com/termsig/termsig/logind/logindtest"
)

// TestLogindShutdownMidJob: systemd-logind announces a poweroff while a
// job runs. The runner holds the shutdown with its delay lock while it
// re-queues the job and unregisters, then releases the lock, so that the
// shutdown goes on at once rather than after InhibitDelayMaxSec.
func TestLogindShutdownMidJob(t *testing.T) {
	bus, fake := logindtest.Start(t, logindtest.Config{InhibitDelayMax: 30 * time.Second})

	e := newEnv(t)
	job := e.enqueue("sleep 30")
	r := e.runner([]string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus.Address()}, "-sources", "signal,logind")
	r.waitLine(`job j-1 started`, 1)
	held := fake.Held()
	require.Len(t, held, 1, "the runner holds a delay lock while it works")
	assert.Equal(t, "runner", held[0].Who)

	announced := time.Now()
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	r.waitLine(`notice: logind: terminate`, 1)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return !all[0].Released.IsZero() }))
	released := fake.Inhibitors()[0].Released

	assert.Equal(t, 0, r.waitExit(), "drained, re-queued, unregistered: a clean exit")
	assert.Empty(t, e.runners(), "unregistered")
	assert.Equal(t, registry.JobState("queued"), e.job(job.ID).State, "re-queued")
	r.waitLine(`told the sources the work is handed back \(Release\): logind \(shutdown/poweroff\)`, 1)
	t.Logf("shutdown announced → lock released: %v (logind would have waited up to 30 s)", released.Sub(announced).Round(time.Millisecond))
}

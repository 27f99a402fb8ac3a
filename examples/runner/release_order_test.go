//go:build linux

package main_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
	"github.com/termsig/termsig/logind/logindtest"
)

// TestLogindReleaseComesAfterTheWorkIsHandedBack checks the effect, not
// the log: at the moment logind sees its delay lock closed, the job is
// already re-queued and the runner unregistered. (From review.) The job takes 500 ms
// to end after SIGTERM, so that a release that came before the hand-back
// is caught with the runner still registered.
func TestLogindReleaseComesAfterTheWorkIsHandedBack(t *testing.T) {
	bus, fake := logindtest.Start(t, logindtest.Config{InhibitDelayMax: 30 * time.Second})

	e := newEnv(t)
	ready := fifo(t)
	job := e.enqueue(fmt.Sprintf(`trap 'sleep 0.5; exit 1' TERM; echo trapped > %s; while :; do sleep 0.05; done`, ready))
	r := e.runner([]string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus.Address()}, "-sources", "signal,logind")
	r.waitLine(`job j-1 started`, 1)
	readLine(t, ready)

	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return !all[0].Released.IsZero() }))
	// Right now, as logind lets the shutdown go on:
	assert.Empty(t, e.runners(), "the runner is unregistered when the lock is released")
	assert.Equal(t, registry.JobState("queued"), e.job(job.ID).State, "the job is re-queued when the lock is released")
	assert.Equal(t, 0, r.waitExit())
}

// TestNoReleaseClaimForSourcesThatHoldNothing: the signal source holds
// nothing, and the timeline does not claim that something was released.
func TestNoReleaseClaimForSourcesThatHoldNothing(t *testing.T) {
	e := newEnv(t)
	e.enqueue("sleep 30")
	r := e.runner(nil)
	r.waitLine(`job j-1 started`, 1)
	r.signal(syscall.SIGTERM)
	assert.Equal(t, 0, r.waitExit())
	for _, l := range r.output() {
		assert.NotContains(t, l, "released")
	}
}

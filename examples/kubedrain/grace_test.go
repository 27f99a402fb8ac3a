package main

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

// TestNoDeadlineKeepsOwnGrace: a notice without a deadline (a power
// button) keeps the pods' own grace periods, as the README says.
func TestNoDeadlineKeepsOwnGrace(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "slow", grace(600)))
	c := newTestController(t, f, t0)
	c.now, c.evictor.now = time.Now, time.Now
	c.handle(t.Context(), notice(termsig.Reboot, "button", time.Time{}, time.Now()))
	awaitDrain(t, c)
	c.stopDrain()
	assert.Equal(t, map[string]int64{"ns/slow": 600}, f.evicted())
}

// TestSpotDuringRebalanceDrainCapsGrace: a spot interruption during a
// drain without a deadline restarts it, so that grace periods end before
// the new deadline.
func TestSpotDuringRebalanceDrainCapsGrace(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "slow", grace(600)))
	f.setRefuse("ns/slow", true)
	c := newTestController(t, f, t0)
	c.now, c.evictor.now = time.Now, time.Now
	c.onRebalance = drain
	c.fallback = time.Minute
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, time.Now()))
	f.awaitAttempts(t, "ns/slow", 2)
	deadline := time.Now().Add(2 * time.Minute)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", deadline, time.Now()))
	f.setRefuse("ns/slow", false)
	awaitDrain(t, c)
	c.stopDrain()
	require.Contains(t, f.evicted(), "ns/slow")
	assert.LessOrEqual(t, f.evicted()["ns/slow"], int64(110), "the grace period outlives the spot interruption's deadline")
}

// TestGraceShrinksWhileBudgetRefuses: each attempt has the grace period
// of the time left then, so a pod a budget lets go late still ends
// before the deadline.
func TestGraceShrinksWhileBudgetRefuses(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "slow", grace(600)))
	f.setRefuse("ns/slow", true)
	c := newTestController(t, f, t0)
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	c.now, c.evictor.now = clock, clock
	deadline := time.Now().Add(2 * time.Minute)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", deadline, time.Now()))
	f.awaitAttempts(t, "ns/slow", 2)
	skew.Store(int64(100 * time.Second)) // 100 s of refusals later
	// An attempt in flight may have read the clock before; the second
	// attempt from now has read it after.
	n := f.attemptsOf("ns/slow")
	f.awaitAttempts(t, "ns/slow", n+2)
	f.setRefuse("ns/slow", false)
	require.True(t, awaitAttemptsWithin(f, "ns/slow", n+3, 5*time.Second))
	c.stopDrain()
	require.Contains(t, f.evicted(), "ns/slow")
	assert.LessOrEqual(t, f.evicted()["ns/slow"], int64(10), "grace period of an eviction 100 s into a 120 s notice, margin 10 s")
}

// TestAncientDeadlineGivesOneSecondOfGrace: a deadline centuries ago (a
// garbled time) gives 1 s, not an overflow into a long grace period.
func TestAncientDeadlineGivesOneSecondOfGrace(t *testing.T) {
	pod := newPod("ns", "slow", grace(600))
	ancient := time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)
	require.False(t, ancient.IsZero())
	assert.Equal(t, int64(1), gracePeriod(pod, ancient, time.Now(), 10*time.Second))
}

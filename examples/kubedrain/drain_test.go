package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/termsig/termsig"
)

// TestLateImminentNoticeStillCordonsAndEvicts: a notice whose deadline
// is less than --margin away (a kubedrain restarted late, an Azure event
// seen Started, a GCE preemption with a long margin) still cordons the
// node and evicts every pod once, with 1 s of grace. ctxClient makes
// calls fail once their context is done, as client-go's REST client
// does.
func TestLateImminentNoticeStillCordonsAndEvicts(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "p", grace(30)))
	c := newTestController(t, f, t0)
	c.kube.client = ctxClient{f} // the evictor shares c.kube
	now := time.Now()
	c.now, c.evictor.now = time.Now, time.Now
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", now.Add(5*time.Second), now))
	awaitDrain(t, c)
	c.stopDrain()
	assert.True(t, f.node(t).Spec.Unschedulable, "the node was not cordoned")
	assert.Equal(t, map[string]int64{"ns/p": 1}, f.evicted(), "no pod was evicted")
}

// TestLaterNoticeDrainsAgainAfterAFinishedDrain: with
// --on-rebalance=drain, a spot interruption after the rebalance drain
// has ended tries the pods a budget kept again, and evicts those that
// landed meanwhile.
func TestLaterNoticeDrainsAgainAfterAFinishedDrain(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "guarded"))
	f.setRefuse("ns/guarded", true)
	c := newTestController(t, f, t0)
	c.onRebalance = drain
	c.fallback = 300 * time.Millisecond
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, time.Now()))
	awaitDrain(t, c) // the fallback ends it: the pod is left
	require.Empty(t, f.evicted())

	f.setRefuse("ns/guarded", false) // the budget allows it now
	_, err := f.CoreV1().Pods("ns").Create(t.Context(), newPod("ns", "landed"), metav1.CreateOptions{})
	require.NoError(t, err)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(2*time.Minute), time.Now()))
	awaitDrain(t, c)
	c.stopDrain()
	assert.Contains(t, f.evicted(), "ns/guarded", "the spot interruption did not retry the refused pod")
	assert.Contains(t, f.evicted(), "ns/landed", "the spot interruption did not evict the pod that landed")
}

// TestSpotAfterEndedRebalanceDrainEvicts: with --on-rebalance=drain, a
// spot interruption after the rebalance drain has ended drains with a
// window of its own, not the rebalance's past one.
func TestSpotAfterEndedRebalanceDrainEvicts(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "guarded"))
	f.setRefuse("ns/guarded", true)
	c := newTestController(t, f, t0)
	c.kube.client = ctxClient{f} // the evictor shares c.kube
	c.now, c.evictor.now = time.Now, time.Now
	c.onRebalance = drain
	c.fallback = 300 * time.Millisecond
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, time.Now()))
	awaitDrain(t, c) // the fallback (at least minDrain) ends it: the pod is left
	require.Empty(t, f.evicted())
	// The rebalance drain's end is over (a clock a second ahead says so,
	// instead of a sleep).
	ahead := func() time.Time { return time.Now().Add(time.Second) }
	c.now, c.evictor.now = ahead, ahead

	f.setRefuse("ns/guarded", false) // the budget allows it now
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(2*time.Minute), time.Now()))
	awaitDrain(t, c)
	c.stopDrain()
	assert.Contains(t, f.evicted(), "ns/guarded", "the spot interruption evicted nothing: its drain started with the rebalance drain's past end")
}

// TestCordonAdviceDoesNotEvict: advice configured as cordon after a
// finished drain evicts nothing.
func TestCordonAdviceDoesNotEvict(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "p"))
	c := newTestController(t, f, t0)
	c.now, c.evictor.now = time.Now, time.Now
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(2*time.Minute), time.Now()))
	awaitDrain(t, c)
	require.Contains(t, f.evicted(), "ns/p")
	// A pod that tolerates the taint lands meanwhile.
	_, err := f.CoreV1().Pods("ns").Create(t.Context(), newPod("ns", "landed"), metav1.CreateOptions{})
	require.NoError(t, err)
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, time.Now()))
	if c.drain != nil {
		awaitDrain(t, c)
		c.stopDrain()
	}
	assert.NotContains(t, f.evicted(), "ns/landed", "a rebalance configured as cordon evicted a pod")
}

package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/termsig/termsig"
)

// TestSpotAfterEndedRebalanceDrainEvicts: with --on-rebalance=drain, a
// spot interruption after the rebalance drain has ended drains with a
// window of its own, not the rebalance's past one. (Found by review.)
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

// TestSpotDuringRebalanceDrainCapsGrace: a spot interruption during a
// drain without a deadline restarts it, so that grace periods end before
// the new deadline. (Found by review.)
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

// TestCordonAdviceDoesNotEvict: advice configured as cordon after a
// finished drain evicts nothing. (Found by review.)
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

// TestGraceShrinksWhileBudgetRefuses: each attempt has the grace period
// of the time left then, so a pod a budget lets go late still ends
// before the deadline. (Found by review.)
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

// slowNodes makes node patches hang until their context is done, as a
// node admission webhook that does not answer does (the API server
// waits up to the webhook's timeoutSeconds, up to 30 s).
type slowClient struct{ ctxClient }

func (c slowClient) CoreV1() typedcorev1.CoreV1Interface { return slowCore{c.ctxClient.CoreV1()} }

type slowCore struct{ typedcorev1.CoreV1Interface }

func (c slowCore) Nodes() typedcorev1.NodeInterface { return slowNodes{c.CoreV1Interface.Nodes()} }

type slowNodes struct{ typedcorev1.NodeInterface }

func (n slowNodes) Patch(ctx context.Context, _ string, _ types.PatchType, _ []byte, _ metav1.PatchOptions, _ ...string) (*corev1.Node, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestHangingNodeWriteDelaysEvictionsAtMostCordonWait: a node write that
// hangs holds the evictions back for cordonWait at most, not
// writeTimeout. (Found by review.)
func TestHangingNodeWriteDelaysEvictionsAtMostCordonWait(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "p"))
	c := newTestController(t, f, t0)
	c.kube.client = slowClient{ctxClient{f}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(2*time.Minute), time.Now()))
	}()
	defer func() {
		<-done
		c.stopDrain()
		if c.timer != nil {
			c.timer.Stop()
		}
	}()
	assert.True(t, awaitAttemptsWithin(f, "ns/p", 1, time.Second),
		"no eviction within 1 s: the drain waits for the node write (writeTimeout %v)", c.writeTimeout)
}

// TestHangingEventDoesNotDelayEvictions: an events API that hangs holds
// up neither the evictions nor, beyond eventTimeout, the next notice.
// (Found by review.)
func TestHangingEventDoesNotDelayEvictions(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "p"))
	c := newTestController(t, f, t0)
	c.kube.client = hangingEvents{ctxClient{f}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(2*time.Minute), time.Now()))
	}()
	ok := awaitAttemptsWithin(f, "ns/p", 1, eventTimeout/2)
	select {
	case <-done:
	case <-time.After(2 * eventTimeout):
		t.Fatal("handle held up by a hanging Event past eventTimeout")
	}
	if c.drain != nil {
		awaitDrain(t, c)
		c.stopDrain()
	}
	assert.True(t, ok, "no eviction while the Event hangs")
}

// hangingEvents makes Event creation hang until its context is done, as
// an API server that does not answer does.
type hangingEvents struct{ ctxClient }

func (c hangingEvents) EventsV1() typedeventsv1.EventsV1Interface {
	return hangingEventsV1{c.ctxClient.EventsV1()}
}

type hangingEventsV1 struct {
	typedeventsv1.EventsV1Interface
}

func (e hangingEventsV1) Events(ns string) typedeventsv1.EventInterface {
	return hangingEventList{e.EventsV1Interface.Events(ns)}
}

type hangingEventList struct{ typedeventsv1.EventInterface }

func (hangingEventList) Create(ctx context.Context, _ *eventsv1.Event, _ metav1.CreateOptions) (*eventsv1.Event, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestOperatorUncordonAfterOwnCordonKept: an operator who had cordoned
// the node before the advice and uncordons it while kubedrain holds it
// is not overruled at kubedrain's next write. (Found by review.)
func TestOperatorUncordonAfterOwnCordonKept(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	operatorPatch(t, f, `{"spec":{"unschedulable":true}}`) // kubectl cordon: the operator's maintenance
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	require.True(t, hasTaint(f.node(t), "rebalance"))
	operatorPatch(t, f, `{"spec":{"unschedulable":null}}`) // kubectl uncordon: done
	// Any later write: a Cleared for another event, reconcile's recheck...
	c.handle(t.Context(), notice(termsig.Cleared, "scheduled/e-9", time.Time{}, t0))
	node := f.node(t)
	assert.False(t, node.Spec.Unschedulable, "kubedrain cordoned the node again after kubectl uncordon, on an unrelated Cleared")
}

// TestPendingStaysBoundedWhileAdviceFlaps: a thousand notices while node
// writes fail leave a bounded queue. (Found by review.)
func TestPendingStaysBoundedWhileAdviceFlaps(t *testing.T) {
	f := newFakeCluster(t, newNode())
	failNodePatches(f)
	c := newTestController(t, f, t0)
	c.log = slog.New(slog.DiscardHandler)
	defer func() {
		if c.timer != nil {
			c.timer.Stop()
		}
	}()
	c.onMaintenance = cordon
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0)) // holds: the node must be written
	for range 500 {
		c.handle(t.Context(), notice(termsig.Maintenance, "scheduled/e-1", t0.Add(time.Hour), t0))
		c.handle(t.Context(), notice(termsig.Cleared, "scheduled/e-1", time.Time{}, t0))
	}
	assert.LessOrEqual(t, len(c.pending), 64, "pending changes after 1000 notices with the API down")
}

// TestAncientDeadlineGrace: a deadline centuries ago (a garbled time)
// gives 1 s, not an overflow into a long grace period. (Found by
// review.)
func TestAncientDeadlineGrace(t *testing.T) {
	pod := newPod("ns", "slow", grace(600))
	ancient := time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)
	require.False(t, ancient.IsZero())
	assert.Equal(t, int64(1), gracePeriod(pod, ancient, time.Now(), 10*time.Second))
}

// TestEventAfterRetriedWrite: a cordon written by a retry records its
// Event. (Found by review.)
func TestEventAfterRetriedWrite(t *testing.T) {
	f := newFakeCluster(t, newNode())
	var mu sync.Mutex
	failures := 1
	f.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failures == 0 {
			return false, nil, nil
		}
		failures--
		return true, nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	})
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	require.False(t, f.node(t).Spec.Unschedulable)
	// What run does when retryC fires.
	ctx, cancel := context.WithCancel(t.Context())
	notices := make(chan termsig.Notice)
	done := make(chan struct{})
	go func() { defer close(done); c.run(ctx, notices, nil) }()
	untilFake(t, f, func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	cancel()
	<-done
	require.True(t, f.node(t).Spec.Unschedulable)
	assert.Contains(t, f.events(t), "Cordon/TerminationNotice", "the notice's Event was lost with its first write")
}

// untilFake waits, watching the fake, until cond holds for testNode.
func untilFake(t *testing.T, f *fakeCluster, cond func(*corev1.Node) bool) {
	t.Helper()
	w, err := f.CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	if cond(f.node(t)) {
		return
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if n, ok := ev.Object.(*corev1.Node); ok && cond(n) {
				return
			}
		case <-timeout:
			t.Fatal("the node never met the condition")
		}
	}
}

package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/termsig/termsig"
)

// TestEvictionsDoNotWaitForTheCordon: a node write that keeps failing
// with an error that may pass (a webhook that is down, an overloaded API
// server) does not hold back the evictions of an imminent notice.
func TestEvictionsDoNotWaitForTheCordon(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "p"))
	failNodePatches(f)
	c := newTestController(t, f, t0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.handle(ctx, notice(termsig.Terminate, "spot/instance-action", time.Now().Add(time.Minute), time.Now()))
	}()
	defer func() { cancel(); <-done; c.stopDrain() }()
	// With a minute to the deadline, evictions should start at once,
	// whether or not the cordon has landed yet.
	f.awaitAttempts(t, "ns/p", 1)
}

// TestFailingAdviceWriteDoesNotHoldUpImminentNotice: advice whose node
// write keeps failing is tried again from run's loop, not inline, so a
// Terminate behind it is handled at once.
func TestFailingAdviceWriteDoesNotHoldUpImminentNotice(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "p"))
	failNodePatches(f)
	c := newTestController(t, f, t0)
	notices := make(chan termsig.Notice, 2)
	notices <- notice(termsig.Rebalance, "rebalance", time.Time{}, time.Now())
	notices <- notice(termsig.Terminate, "spot/instance-action", time.Now().Add(2*time.Minute), time.Now())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); c.run(ctx, notices, nil) }()
	defer func() { cancel(); <-done }()
	f.awaitAttempts(t, "ns/p", 1)
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
// writeTimeout.
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

// TestClearedKeepsImminentDrainWhenPatchForbidden: when node writes are
// refused for good, the drain of an imminent notice goes on through a
// rebalance and its Cleared.
func TestClearedKeepsImminentDrainWhenPatchForbidden(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "guarded"))
	f.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, testNode, errors.New("admission webhook denied the request"))
	})
	f.setRefuse("ns/guarded", true)
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(time.Minute), time.Now()))
	f.awaitAttempts(t, "ns/guarded", 2)
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, time.Now()))
	c.handle(t.Context(), notice(termsig.Cleared, "rebalance", time.Time{}, time.Now()))
	defer func() {
		if c.drain != nil {
			c.stopDrain()
		}
	}()
	require.NotNil(t, c.drain, "the spot interruption's drain was stopped by a rebalance's Cleared")
	f.setRefuse("ns/guarded", false)
	n := f.attemptsOf("ns/guarded")
	f.awaitAttempts(t, "ns/guarded", n+1)
	assert.Contains(t, f.evicted(), "ns/guarded")
}

// TestFailedWriteNotReportedAsDone: a node write that fails (a webhook
// down) is neither logged as done nor recorded as an Event: the Cleared's
// uncordon did not happen, the node is still cordoned.
func TestFailedWriteNotReportedAsDone(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	var logs syncBuffer
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	require.True(t, f.node(t).Spec.Unschedulable)

	f.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New(`failed calling webhook "nodes.example.com": connection refused`))
	})
	c.handle(t.Context(), notice(termsig.Cleared, "rebalance", time.Time{}, t0))
	require.True(t, f.node(t).Spec.Unschedulable, "the patch failed: the node is still cordoned")
	assert.NotContains(t, f.events(t), "Uncordon/TerminationNoticeCleared", "an Event says the node was uncordoned")
	assert.NotContains(t, logs.String(), "uncordoned the node", "the log says the node was uncordoned")
}

// TestFailedCordonNotLoggedAsUpdated: the same for a cordon.
func TestFailedCordonNotLoggedAsUpdated(t *testing.T) {
	f := newFakeCluster(t, newNode())
	failNodePatches(f)
	c := newTestController(t, f, t0)
	var logs syncBuffer
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	require.False(t, f.node(t).Spec.Unschedulable)
	assert.NotContains(t, logs.String(), "node updated", "the log says the node was updated")
}

// TestLastingWriteFailureLogsOnce: a node write that keeps failing the
// same way (a webhook down for minutes) is logged once, not at every
// retry: in production that is a WARN and a false "node updated" INFO
// every 2.5–5 s per node.
func TestLastingWriteFailureLogsOnce(t *testing.T) {
	f := newFakeCluster(t, newNode())
	failNodePatches(f)
	c := newTestController(t, f, t0)
	var logs syncBuffer
	c.log = slog.New(slog.NewJSONHandler(&logs, nil))
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	for range 200 { // what run does at each retryC
		<-c.retryC
		c.flush(t.Context())
	}
	c.timer.Stop()
	lines := strings.Count(logs.String(), "\n")
	assert.LessOrEqual(t, lines, 4, "%d lines for one lasting failure; the first ones:\n%.1200s", lines, logs.String())
}

// TestPendingStaysBoundedWhileAdviceFlaps: a thousand notices while node
// writes fail leave a bounded queue.
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

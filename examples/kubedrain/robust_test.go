package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typedpolicyv1 "k8s.io/client-go/kubernetes/typed/policy/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/termsig/termsig"
)

// ctxClient is the fake clientset, except that node reads and patches,
// pod lists and evictions fail once their context is done, as client-go's
// real REST client does (its rate limiter's Wait and net/http both check
// ctx first). The plain fake ignores ctx entirely.
type ctxClient struct{ *fakeCluster }

func (c ctxClient) CoreV1() typedcorev1.CoreV1Interface { return ctxCore{c.fakeCluster.CoreV1()} }
func (c ctxClient) PolicyV1() typedpolicyv1.PolicyV1Interface {
	return ctxPolicy{c.fakeCluster.PolicyV1()}
}

type ctxCore struct{ typedcorev1.CoreV1Interface }

func (c ctxCore) Nodes() typedcorev1.NodeInterface { return ctxNodes{c.CoreV1Interface.Nodes()} }
func (c ctxCore) Pods(ns string) typedcorev1.PodInterface {
	return ctxPods{c.CoreV1Interface.Pods(ns)}
}

type ctxNodes struct{ typedcorev1.NodeInterface }

func (n ctxNodes) Get(ctx context.Context, name string, o metav1.GetOptions) (*corev1.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return n.NodeInterface.Get(ctx, name, o)
}

func (n ctxNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return n.NodeInterface.Patch(ctx, name, pt, data, o, sub...)
}

type ctxPods struct{ typedcorev1.PodInterface }

func (p ctxPods) List(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return p.PodInterface.List(ctx, o)
}

type ctxPolicy struct {
	typedpolicyv1.PolicyV1Interface
}

func (p ctxPolicy) Evictions(ns string) typedpolicyv1.EvictionInterface {
	return ctxEvictions{p.PolicyV1Interface.Evictions(ns)}
}

type ctxEvictions struct {
	typedpolicyv1.EvictionInterface
}

func (e ctxEvictions) Evict(ctx context.Context, ev *policyv1.Eviction) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.EvictionInterface.Evict(ctx, ev)
}

// operatorPatch applies a JSON merge patch to the node, as kubectl does.
func operatorPatch(t *testing.T, f *fakeCluster, patch string) {
	t.Helper()
	_, err := f.CoreV1().Nodes().Patch(context.Background(), testNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// failNodePatches makes every node patch fail with a 500, as a node
// admission webhook that is down (failurePolicy: Fail) does.
func failNodePatches(f *fakeCluster) {
	f.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New(`failed calling webhook "nodes.example.com": connection refused`))
	})
}

// TestEvictionsDoNotWaitForTheCordon: a node write that keeps failing
// with an error that may pass (a webhook that is down, an overloaded API
// server) does not hold back the evictions of an imminent notice.
// (Found by review.)
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
// Terminate behind it is handled at once. (Found by review.)
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

// TestLateImminentNoticeStillCordonsAndEvicts: a notice whose deadline
// is less than --margin away (a kubedrain restarted late, an Azure event
// seen Started, a GCE preemption with a long margin) still cordons the
// node and evicts every pod once, with 1 s of grace. ctxClient makes
// calls fail once their context is done, as client-go's REST client
// does. (Found by review.)
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
// landed meanwhile. (Found by review.)
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

// TestOperatorRecordonKept: an operator who uncordons the node while
// kubedrain holds it and later cordons it for their own reasons keeps
// that cordon when the advice clears: the API server's field management
// says the cordon is theirs now. (Found by review.)
func TestOperatorRecordonKept(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	require.True(t, f.node(t).Spec.Unschedulable)
	operatorPatch(t, f, `{"spec":{"unschedulable":null}}`) // kubectl uncordon
	operatorPatch(t, f, `{"spec":{"unschedulable":true}}`) // later: kubectl cordon, the operator's own
	c.handle(t.Context(), notice(termsig.Cleared, "rebalance", time.Time{}, t0))
	assert.True(t, f.node(t).Spec.Unschedulable, "kubedrain lifted the operator's cordon")
}

// TestKubectlUncordonLiftsAKeptReason: kubectl uncordon on a node that
// kubedrain keeps cordoned for an imminent notice of an earlier run is
// the operator's last word: later notices do not cordon it again for
// that reason, the taint goes, and the old reason drives no evictions.
// (Found by review.)
func TestKubectlUncordonLiftsAKeptReason(t *testing.T) {
	spot := reason{Source: "imds", Event: "spot/instance-action", Kind: termsig.Terminate, Deadline: t0.Add(2 * time.Minute), Drain: true}
	f := newFakeCluster(t, recorded(t, record{Cordoned: true, Reasons: []reason{spot}, BootID: "boot-1"}), newPod("ns", "p"))
	c := newTestController(t, f, t0)
	require.False(t, c.reconcile(t.Context()))             // kept, with the warning
	operatorPatch(t, f, `{"spec":{"unschedulable":null}}`) // kubectl uncordon, as the warning says
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	c.handle(t.Context(), notice(termsig.Cleared, "rebalance", time.Time{}, t0))
	if c.drain != nil {
		awaitDrain(t, c)
		c.stopDrain()
	}
	assert.Empty(t, f.evicted(), "a rebalance notice (--on-rebalance=cordon) evicted the pods, for the kept spot reason")
	node := f.node(t)
	assert.False(t, node.Spec.Unschedulable, "the operator's uncordon was undone")
	for _, tn := range node.Spec.Taints {
		assert.NotEqual(t, TaintKey, tn.Key, "kubedrain's NoSchedule taint stays after kubectl uncordon")
	}
}

// TestFullRecordKeepsImminentReason: a record at maxReasons makes room
// by dropping advice, never an imminent reason. (Found by review.)
func TestFullRecordKeepsImminentReason(t *testing.T) {
	var rec record
	rec.add(reason{Source: "imds", Event: "spot/instance-action", Kind: termsig.Terminate, Drain: true})
	for i := range maxReasons {
		rec.add(reason{Source: "azure", Event: fmt.Sprint("e-", i), Kind: termsig.Maintenance})
	}
	assert.True(t, rec.has("imds", "spot/instance-action"), "the imminent reason was dropped for advice")
	assert.Equal(t, termsig.Terminate, rec.strongest())
}

// TestCancelledDrainIsNotReportedDrained: a drain stopped because its
// advice was withdrawn records no "Drained" Event. (Found by review.)
func TestCancelledDrainIsNotReportedDrained(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "guarded"))
	f.setRefuse("ns/guarded", true)
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Maintenance, "scheduled/e-1", time.Now().Add(time.Hour), time.Now()))
	f.awaitAttempts(t, "ns/guarded", 2)
	c.handle(t.Context(), notice(termsig.Cleared, "scheduled/e-1", time.Time{}, time.Now()))
	assert.Nil(t, c.drain, "the drain was stopped")
	assert.NotContains(t, f.events(t), "Drain/Drained", "a cancelled drain is reported as done")
}

// TestNoDeadlineKeepsOwnGrace: a notice without a deadline (a power
// button) keeps the pods' own grace periods, as the README says.
// (Found by review.)
func TestNoDeadlineKeepsOwnGrace(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "slow", grace(600)))
	c := newTestController(t, f, t0)
	c.now, c.evictor.now = time.Now, time.Now
	c.handle(t.Context(), notice(termsig.Reboot, "button", time.Time{}, time.Now()))
	awaitDrain(t, c)
	c.stopDrain()
	assert.Equal(t, map[string]int64{"ns/slow": 600}, f.evicted())
}

// TestClearedKeepsImminentDrainWhenPatchForbidden: when node writes are
// refused for good, the drain of an imminent notice goes on through a
// rebalance and its Cleared. (Found by review.)
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

// TestForeignTaintWithOurKeyKept: a taint with kubedrain's key that
// kubedrain did not put there (another effect, no record) stays.
// (Found by review.)
func TestForeignTaintWithOurKeyKept(t *testing.T) {
	theirs := corev1.Taint{Key: TaintKey, Value: "manual", Effect: corev1.TaintEffectNoExecute}
	f := newFakeCluster(t, newNode(func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{theirs} }))
	c := newTestController(t, f, t0)
	c.reconcile(t.Context())
	assert.Equal(t, []corev1.Taint{theirs}, f.node(t).Spec.Taints)
}

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/termsig/termsig"
)

// TestOperatorRecordonKept: an operator who uncordons the node while
// kubedrain holds it and later cordons it for their own reasons keeps
// that cordon when the advice clears: the API server's field management
// says the cordon is theirs now.
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

// TestOperatorUncordonAfterOwnCordonKept: an operator who had cordoned
// the node before the advice and uncordons it while kubedrain holds it
// is not overruled at kubedrain's next write.
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

// TestKubectlUncordonLiftsAKeptReason: kubectl uncordon on a node that
// kubedrain keeps cordoned for an imminent notice of an earlier run is
// the operator's last word: later notices do not cordon it again for
// that reason, the taint goes, and the old reason drives no evictions.
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

// TestForeignTaintWithOurKeyKept: a taint with kubedrain's key that
// kubedrain did not put there (another effect, no record) stays.
func TestForeignTaintWithOurKeyKept(t *testing.T) {
	theirs := corev1.Taint{Key: TaintKey, Value: "manual", Effect: corev1.TaintEffectNoExecute}
	f := newFakeCluster(t, newNode(func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{theirs} }))
	c := newTestController(t, f, t0)
	c.reconcile(t.Context())
	assert.Equal(t, []corev1.Taint{theirs}, f.node(t).Spec.Taints)
}

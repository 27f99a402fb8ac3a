package main

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
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
	k8stesting "k8s.io/client-go/testing"

	"github.com/termsig/termsig"
)

// t0 is the tests' "now". It is the real time, since a drain's context
// ends at a real time: a deadline of t0+2m gives a drain that lasts.
var t0 = time.Now()

func TestGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		own      *int64
		deadline time.Time
		want     int64
	}{
		{"unset own, far deadline", nil, t0.Add(time.Hour), 30},
		{"own shorter than the time left", new(int64(20)), t0.Add(2 * time.Minute), 20},
		{"capped by the deadline less the margin", new(int64(300)), t0.Add(2 * time.Minute), 110},
		{"unknown deadline keeps the pod's own", new(int64(300)), time.Time{}, 300},
		{"no time left is 1 s, not an immediate deletion", new(int64(300)), t0.Add(5 * time.Second), 1},
		{"deadline passed", nil, t0.Add(-time.Minute), 1},
		{"a pod that asked for 0 keeps 0", new(int64(0)), t0.Add(2 * time.Minute), 0},
		{"a negative own counts as 0", new(int64(-5)), t0.Add(2 * time.Minute), 0},
		{"fractions round down", new(int64(300)), t0.Add(20*time.Second + 999*time.Millisecond), 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod("ns", "p")
			p.Spec.TerminationGracePeriodSeconds = tc.own
			assert.Equal(t, tc.want, gracePeriod(p, tc.deadline, t0, 10*time.Second))
		})
	}
}

func TestSkipOf(t *testing.T) {
	e := &evictor{kube: &kube{node: testNode}, self: types.NamespacedName{Namespace: "kube-system", Name: "kubedrain-abcde"}}
	mirror := func(p *corev1.Pod) { p.Annotations = map[string]string{mirrorAnnotation: "x"} }
	for _, tc := range []struct {
		pod  *corev1.Pod
		want skip
	}{
		{newPod("ns", "plain"), ""},
		{newPod("ns", "rs", ownedBy("ReplicaSet")), ""},
		{newPod("ns", "job", ownedBy("Job")), ""},
		{newPod("ns", "ds", ownedBy("DaemonSet")), skipDaemonSet},
		{newPod("kube-system", "etcd", mirror), skipMirror},
		{newPod("kube-system", "kubedrain-abcde", ownedBy("DaemonSet")), skipDaemonSet},
		{newPod("kube-system", "kubedrain-abcde"), skipSelf},
		{newPod("ns", "done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), skipFinished},
		{newPod("ns", "failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), skipFinished},
		{newPod("ns", "there", func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }), skipElsewhere},
		// An owner that is not the controller does not make it a DaemonSet pod.
		{newPod("ns", "adopted", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "x"}}
		}), ""},
	} {
		t.Run(tc.pod.Name, func(t *testing.T) { assert.Equal(t, tc.want, e.skipOf(tc.pod)) })
	}
}

// TestDrainOnSpotInterruption is the main path: an imminent notice
// cordons and taints the node, records it, and evicts the pods that are
// not DaemonSet, mirror or kubedrain's own, each with its grace period
// capped by the deadline.
func TestDrainOnSpotInterruption(t *testing.T) {
	f := newFakeCluster(t, newNode(),
		newPod("ns", "plain"), // 30 s by default
		newPod("ns", "slow", ownedBy("ReplicaSet"), grace(600)), // capped
		newPod("ns", "quick", grace(5)),
		newPod("ns", "scratch", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}),
		newPod("kube-system", "ds", ownedBy("DaemonSet")),
		newPod("kube-system", "static", func(p *corev1.Pod) { p.Annotations = map[string]string{mirrorAnnotation: "h"} }),
		newPod("kube-system", "kubedrain-abcde"),
		newPod("ns", "elsewhere", func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }),
	)
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	awaitDrain(t, c)

	assert.Equal(t, map[string]int64{"ns/plain": 30, "ns/slow": 110, "ns/quick": 5, "ns/scratch": 30}, f.evicted())
	node := f.node(t)
	assert.True(t, node.Spec.Unschedulable)
	assert.Equal(t, []corev1.Taint{{Key: TaintKey, Value: "terminate", Effect: corev1.TaintEffectNoSchedule}}, node.Spec.Taints)
	rec, err := readRecord(node)
	require.NoError(t, err)
	assert.True(t, rec.Cordoned)
	assert.Equal(t, "boot-1", rec.BootID)
	require.Len(t, rec.Reasons, 1)
	r := rec.Reasons[0]
	assert.True(t, r.Deadline.Equal(t0.Add(2*time.Minute)), "deadline %v", r.Deadline)
	r.Deadline = time.Time{}
	assert.Equal(t, reason{Source: "imds", Event: "spot/instance-action", Kind: termsig.Terminate, Drain: true}, r)
	assert.Equal(t, []string{"Drain/Drained", "Drain/TerminationNotice"}, f.events(t))
	c.stopDrain()
}

// TestBudgetRefusalRetried: a pod whose budget refuses its eviction is
// tried again until the budget allows it.
func TestBudgetRefusalRetried(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "guarded"), newPod("ns", "free"))
	f.setRefuse("ns/guarded", true)
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(time.Minute), t0))
	f.awaitAttempts(t, "ns/guarded", 3)
	assert.Equal(t, map[string]int64{"ns/free": 30}, f.evicted(), "the free pod is not held up by the guarded one")
	f.setRefuse("ns/guarded", false)
	awaitDrain(t, c)
	assert.Contains(t, f.evicted(), "ns/guarded")
	c.stopDrain()
}

// TestBudgetRefusalUntilTheEnd: past the deadline less the margin the
// pod is left, and the drain ends.
func TestBudgetRefusalUntilTheEnd(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "guarded"))
	f.setRefuse("ns/guarded", true)
	c := newTestController(t, f, t0)
	// The real clock: the drain's context ends margin before the
	// deadline, 100 ms from now.
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(c.evictor.margin+100*time.Millisecond), t0))
	awaitDrain(t, c)
	assert.Empty(t, f.evicted())
	assert.Greater(t, f.attemptsOf("ns/guarded"), 1)
	assert.Contains(t, f.events(t), "Drain/Drained")
	c.stopDrain()
}

// TestRebalanceRoundTrip: advice cordons (the default for rebalance),
// and its Cleared lifts the cordon and the taint, as they were
// kubedrain's.
func TestRebalanceRoundTrip(t *testing.T) {
	f := newFakeCluster(t, newNode(func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoExecute}}
	}), newPod("ns", "p"))
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	node := f.node(t)
	assert.True(t, node.Spec.Unschedulable)
	assert.Equal(t, []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoExecute}, {Key: TaintKey, Value: "rebalance", Effect: corev1.TaintEffectNoSchedule}}, node.Spec.Taints)
	assert.Nil(t, c.drain, "cordon only")
	assert.Empty(t, f.evicted())

	c.handle(t.Context(), notice(termsig.Cleared, "rebalance", time.Time{}, t0))
	node = f.node(t)
	assert.False(t, node.Spec.Unschedulable)
	assert.Equal(t, []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoExecute}}, node.Spec.Taints)
	assert.NotContains(t, node.Annotations, AnnotationKey)
	assert.Equal(t, []string{"Cordon/TerminationNotice", "Uncordon/TerminationNoticeCleared"}, f.events(t))
}

// TestOperatorCordonKept: a node an operator cordoned stays cordoned
// when the advice clears; only kubedrain's taint goes.
func TestOperatorCordonKept(t *testing.T) {
	f := newFakeCluster(t, newNode(func(n *corev1.Node) { n.Spec.Unschedulable = true }))
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	rec, err := readRecord(f.node(t))
	require.NoError(t, err)
	assert.False(t, rec.Cordoned)
	c.handle(t.Context(), notice(termsig.Cleared, "rebalance", time.Time{}, t0))
	node := f.node(t)
	assert.True(t, node.Spec.Unschedulable)
	assert.Empty(t, node.Spec.Taints)
	assert.NotContains(t, node.Annotations, AnnotationKey)
}

// TestClearedKeepsOtherReasons: a Cleared for one advice leaves the
// cordon of another, and never lifts an imminent one.
func TestClearedKeepsOtherReasons(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	c.onMaintenance = cordon
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	c.handle(t.Context(), notice(termsig.Maintenance, "scheduled/e-1", t0.Add(time.Hour), t0))
	c.handle(t.Context(), notice(termsig.Cleared, "rebalance", time.Time{}, t0))
	node := f.node(t)
	assert.True(t, node.Spec.Unschedulable)
	assert.Equal(t, "maintenance", node.Spec.Taints[0].Value)

	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	assert.Equal(t, "terminate", f.node(t).Spec.Taints[0].Value, "the strongest reason shows")
	c.handle(t.Context(), notice(termsig.Cleared, "scheduled/e-1", time.Time{}, t0))
	c.handle(t.Context(), notice(termsig.Cleared, "spot/instance-action", time.Time{}, t0))
	node = f.node(t)
	assert.True(t, node.Spec.Unschedulable, "an imminent notice is never cleared")
	assert.Equal(t, "terminate", node.Spec.Taints[0].Value)
	awaitDrain(t, c)
	c.stopDrain()
}

// TestTerminateAfterMaintenanceDrain: a drain for maintenance an hour
// away gives pods their own grace; a spot interruption then starts it
// again with grace periods capped by its two minutes.
func TestTerminateAfterMaintenanceDrain(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "slow", grace(600)))
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Maintenance, "scheduled/e-1", t0.Add(time.Hour), t0))
	awaitDrain(t, c)
	assert.Equal(t, map[string]int64{"ns/slow": 600}, f.evicted())
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	awaitDrain(t, c)
	assert.Equal(t, map[string]int64{"ns/slow": 110}, f.evicted())
	// Another maintenance drains again (a pod may have landed), but a pod
	// already going within its grace period is left going.
	c.handle(t.Context(), notice(termsig.Maintenance, "scheduled/e-2", t0.Add(2*time.Hour), t0))
	awaitDrain(t, c)
	assert.Equal(t, 2, f.attemptsOf("ns/slow"))
	c.stopDrain()
}

// TestIgnoreAdvice: --on-rebalance=ignore leaves the node alone.
func TestIgnoreAdvice(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	c.onRebalance = ignore
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	c.handle(t.Context(), notice(termsig.Reload, "SIGHUP", time.Time{}, t0))
	assert.False(t, f.node(t).Spec.Unschedulable)
	assert.Empty(t, f.events(t))
}

// TestNodeUpdateConflictRetried: a write between kubedrain's read and
// its patch (a conflict) makes it read again and patch again.
func TestNodeUpdateConflictRetried(t *testing.T) {
	f := newFakeCluster(t, newNode())
	conflicts := 2
	f.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, testNode, errors.New("the object has been modified"))
	})
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	assert.Zero(t, conflicts)
	assert.True(t, f.node(t).Spec.Unschedulable)
}

// TestNodeUpdateRetriedWhileTheAPIFails: an API server that fails for a
// while (503) is tried again; the cordon lands once it answers.
func TestNodeUpdateRetriedWhileTheAPIFails(t *testing.T) {
	f := newFakeCluster(t, newNode())
	failures := 5
	f.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures == 0 {
			return false, nil, nil
		}
		failures--
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(time.Minute), t0))
	require.NotNil(t, c.drain, "the drain does not wait for the cordon")
	// run's loop does this: each retryC is one more try.
	for c.pending != nil {
		<-c.retryC
		c.flush(t.Context())
	}
	assert.Zero(t, failures)
	assert.True(t, f.node(t).Spec.Unschedulable)
	assert.Nil(t, c.retryC)
	awaitDrain(t, c)
	c.stopDrain()
}

// TestForbiddenNotRetried: an error that will not pass (RBAC) is logged
// and the drain goes on without the cordon.
func TestForbiddenNotRetried(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "p"))
	patches := 0
	f.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		patches++
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, testNode, errors.New("RBAC"))
	})
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	awaitDrain(t, c)
	assert.Equal(t, 1, patches)
	assert.Contains(t, f.evicted(), "ns/p")
	c.stopDrain()
}

// TestDryRunChangesNothing: --dry-run reads, and writes nothing.
func TestDryRunChangesNothing(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "p"))
	c := newTestController(t, f, t0)
	c.kube.dryRun = true
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	awaitDrain(t, c)
	c.stopDrain()
	for _, a := range f.Actions() {
		assert.Contains(t, []string{"get", "list"}, a.GetVerb(), "a write in a dry run: %v", a)
	}
	assert.False(t, f.node(t).Spec.Unschedulable)
}

// recorded returns a node that an earlier kubedrain cordoned for rec.
func recorded(t *testing.T, rec record, mods ...func(*corev1.Node)) *corev1.Node {
	t.Helper()
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	return newNode(append([]func(*corev1.Node){func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		n.Spec.Taints = []corev1.Taint{{Key: TaintKey, Value: rec.strongest().String(), Effect: corev1.TaintEffectNoSchedule}}
		n.Annotations = map[string]string{AnnotationKey: string(b)}
	}}, mods...)...)
}

// TestRestart covers a kubedrain that starts on a node an earlier one
// had cordoned.
func TestRestart(t *testing.T) {
	advice := reason{Source: "imds", Event: "rebalance", Kind: termsig.Rebalance}
	spot := reason{Source: "imds", Event: "spot/instance-action", Kind: termsig.Terminate, Deadline: t0.Add(2 * time.Minute), Drain: true}
	t.Run("advice gone while it was away is cleared once the source has heard", func(t *testing.T) {
		f := newFakeCluster(t, recorded(t, record{Cordoned: true, Reasons: []reason{advice}}))
		c := newTestController(t, f, t0)
		healthy := false
		c.healthy = func(string) bool { return healthy }
		assert.True(t, c.reconcile(t.Context()), "not settled while the source has not heard")
		assert.True(t, f.node(t).Spec.Unschedulable)
		healthy = true
		assert.False(t, c.reconcile(t.Context()))
		node := f.node(t)
		assert.False(t, node.Spec.Unschedulable)
		assert.Empty(t, node.Spec.Taints)
		assert.NotContains(t, node.Annotations, AnnotationKey)
	})
	t.Run("advice seen again is kept", func(t *testing.T) {
		f := newFakeCluster(t, recorded(t, record{Cordoned: true, Reasons: []reason{advice}}))
		c := newTestController(t, f, t0)
		c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
		assert.False(t, c.reconcile(t.Context()))
		assert.True(t, f.node(t).Spec.Unschedulable)
	})
	t.Run("an imminent notice still posted continues the drain", func(t *testing.T) {
		f := newFakeCluster(t, recorded(t, record{Cordoned: true, Reasons: []reason{spot}, BootID: "boot-1"}), newPod("ns", "p"))
		c := newTestController(t, f, t0)
		c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
		awaitDrain(t, c)
		assert.Contains(t, f.evicted(), "ns/p")
		rec, err := readRecord(f.node(t))
		require.NoError(t, err)
		assert.True(t, rec.Cordoned, "the cordon is still kubedrain's")
		c.stopDrain()
	})
	t.Run("an imminent notice of this boot that no longer shows keeps the cordon", func(t *testing.T) {
		f := newFakeCluster(t, recorded(t, record{Cordoned: true, Reasons: []reason{spot}, BootID: "boot-1"}))
		c := newTestController(t, f, t0)
		assert.False(t, c.reconcile(t.Context()))
		assert.True(t, f.node(t).Spec.Unschedulable)
	})
	t.Run("an imminent notice of an earlier boot is over", func(t *testing.T) {
		f := newFakeCluster(t, recorded(t, record{Cordoned: true, Reasons: []reason{spot}, BootID: "boot-0"}))
		c := newTestController(t, f, t0)
		assert.False(t, c.reconcile(t.Context()))
		assert.False(t, f.node(t).Spec.Unschedulable)
	})
	t.Run("a damaged record never lifts a cordon", func(t *testing.T) {
		f := newFakeCluster(t, newNode(func(n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Annotations = map[string]string{AnnotationKey: `{"cordoned": tru`}
		}))
		c := newTestController(t, f, t0)
		assert.False(t, c.reconcile(t.Context()))
		node := f.node(t)
		assert.True(t, node.Spec.Unschedulable)
		assert.NotContains(t, node.Annotations, AnnotationKey)
	})
}

func TestReadRecord(t *testing.T) {
	for _, tc := range []struct {
		name, annotation string
		bad              bool
	}{
		{"valid", `{"cordoned":true,"reasons":[{"source":"imds","event":"e","kind":"terminate"}]}`, false},
		{"empty reasons", `{"cordoned":false,"reasons":[]}`, false},
		{"not JSON", `cordoned`, true},
		{"unknown kind", `{"reasons":[{"source":"imds","kind":"explode"}]}`, true},
		{"no source", `{"reasons":[{"kind":"terminate"}]}`, true},
		{"a Cleared reason", `{"reasons":[{"source":"imds","kind":"cleared"}]}`, true},
		{"too large", `{"reasons":[],"x":"` + strings.Repeat("a", maxRecordBytes) + `"}`, true},
		{"too many reasons", `{"reasons":[` + strings.Repeat(`{"source":"s","kind":"rebalance"},`, maxReasons) + `{"source":"s","kind":"rebalance"}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(func(n *corev1.Node) { n.Annotations = map[string]string{AnnotationKey: tc.annotation} })
			rec, err := readRecord(n)
			if tc.bad {
				assert.ErrorIs(t, err, errBadRecord)
				assert.Equal(t, record{}, rec)
				return
			}
			assert.NoError(t, err)
		})
	}
}

// FuzzReadRecord: whatever the annotation holds, reading it never
// panics, and a record it accepts makes a patch that does too.
func FuzzReadRecord(f *testing.F) {
	f.Add(`{"cordoned":true,"reasons":[{"source":"imds","event":"spot/instance-action","kind":"terminate","deadline":"2026-11-30T10:02:00Z","drain":true}],"bootID":"b"}`)
	f.Add(`{"cordoned":false,"reasons":[{"source":"gcemeta","event":"maintenance-event","kind":"maintenance"}]}`)
	f.Add(`{"cordoned":true,"reasons":[{"source":"logind","event":"shutdown/poweroff","kind":"terminate","drain":true}],"excludedFromLoadBalancers":true}`)
	f.Add(`{"reasons":null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		n := newNode(func(n *corev1.Node) { n.Annotations = map[string]string{AnnotationKey: s} })
		rec, err := readRecord(n)
		if err != nil {
			return
		}
		if _, err := nodePatch(n, &rec); err != nil {
			t.Fatalf("patch for an accepted record: %v", err)
		}
	})
}

func TestNodePatch(t *testing.T) {
	spot := reason{Source: "imds", Event: "spot/instance-action", Kind: termsig.Terminate}
	t.Run("nothing to do", func(t *testing.T) {
		p, err := nodePatch(newNode(), &record{})
		require.NoError(t, err)
		assert.Nil(t, p)
	})
	t.Run("cordon carries the resourceVersion", func(t *testing.T) {
		n := newNode(func(n *corev1.Node) { n.ResourceVersion = "42" })
		rec := record{Reasons: []reason{spot}}
		p, err := nodePatch(n, &rec)
		require.NoError(t, err)
		assert.True(t, rec.Cordoned)
		var got map[string]any
		require.NoError(t, json.Unmarshal(p, &got))
		assert.Equal(t, "42", got["metadata"].(map[string]any)["resourceVersion"])
		assert.Equal(t, true, got["spec"].(map[string]any)["unschedulable"])
	})
	t.Run("an up-to-date node needs no patch", func(t *testing.T) {
		rec := record{Cordoned: true, Reasons: []reason{spot}}
		n := recorded(t, rec)
		p, err := nodePatch(n, &rec)
		require.NoError(t, err)
		assert.Nil(t, p)
	})
	t.Run("the last taint removed is an empty list", func(t *testing.T) {
		rec := record{Cordoned: true, Reasons: []reason{spot}}
		n := recorded(t, rec)
		p, err := nodePatch(n, &record{Cordoned: true})
		require.NoError(t, err)
		assert.JSONEq(t, `{"metadata":{"resourceVersion":"","annotations":{"`+AnnotationKey+`":null}},"spec":{"unschedulable":null,"taints":[]}}`, string(p))
	})
}

func TestParseFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "from-env")
	o, err := parseFlags(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "from-env", o.node)
	assert.Equal(t, cordon, o.onRebalance)
	assert.Equal(t, cordon, o.onMaintenance)
	assert.Equal(t, time.Hour, o.maxHold, "--max-hold's default")
	o, err = parseFlags([]string{"--node", "n", "--on-rebalance", "drain", "--on-maintenance", "ignore"}, nil)
	require.NoError(t, err)
	assert.Equal(t, drain, o.onRebalance)
	assert.Equal(t, ignore, o.onMaintenance)
	for _, bad := range [][]string{
		{"--on-rebalance", "evict"},
		{"--margin", "-1s"},
		{"--fallback", "0s"},
		{"--max-hold", "0s"},
		{"--log-format", "xml"},
		{"--log-level", "loud"},
		{"extra"},
	} {
		_, err := parseFlags(bad, &strings.Builder{})
		assert.Error(t, err, "%q", bad)
	}
	t.Setenv("NODE_NAME", "")
	_, err = parseFlags(nil, nil)
	assert.ErrorContains(t, err, "NODE_NAME")
}

// TestForbiddenReadStillDrains: a node kubedrain may not even read
// (RBAC) is still drained.
func TestForbiddenReadStillDrains(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "p"))
	f.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, testNode, errors.New("RBAC"))
	})
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	awaitDrain(t, c)
	assert.Equal(t, map[string]int64{"ns/p": 30}, f.evicted())
	c.stopDrain()
}

// TestPendingChangesStayBounded: while the API server is away, advice
// that comes and goes a hundred times leaves at most two changes per
// reason waiting, and once it is back the node gets the last word of
// each: cordoned for the interruption, the rebalance cleared.
func TestPendingChangesStayBounded(t *testing.T) {
	f := newFakeCluster(t, newNode())
	var down atomic.Bool
	down.Store(true)
	f.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		}
		return false, nil, nil
	})
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	for range 100 {
		c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
		c.handle(t.Context(), notice(termsig.Cleared, "rebalance", time.Time{}, t0))
	}
	assert.Len(t, c.pending, 2)
	down.Store(false)
	<-c.retryC
	_, err := c.flush(t.Context())
	require.NoError(t, err)
	node := f.node(t)
	assert.True(t, node.Spec.Unschedulable)
	rec, err := readRecord(node)
	require.NoError(t, err)
	assert.Equal(t, "imds spot/instance-action: terminate", rec.String())
	awaitDrain(t, c)
	c.stopDrain()
}

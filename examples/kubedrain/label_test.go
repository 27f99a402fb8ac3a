package main

// Tests of the label that takes a node out of external load balancers
// (ExcludeLabel): set while kubedrain drains the node, removed when it
// lets the node go, and only if kubedrain set it.

import (
	"errors"
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
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds/imdstest"
)

// excludeLabel returns the value of ExcludeLabel on n, and whether n has
// it.
func excludeLabel(n *corev1.Node) (string, bool) {
	v, ok := n.Labels[ExcludeLabel]
	return v, ok
}

// labelled returns a node modifier that sets ExcludeLabel to value, as
// an operator or the cluster's installer does.
func labelled(value string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels = map[string]string{ExcludeLabel: value} }
}

func recordOf(t *testing.T, n *corev1.Node) record {
	t.Helper()
	rec, err := readRecord(n)
	require.NoError(t, err)
	return rec
}

// TestImminentNoticeExcludesTheNodeFromLoadBalancers: a spot
// interruption sets ExcludeLabel=true with the cordon, and the record
// says that the label is kubedrain's.
func TestImminentNoticeExcludesTheNodeFromLoadBalancers(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	log, lw := watchedLogger(t)
	c.log, c.kube.log = log, log
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	node := f.node(t)
	v, ok := excludeLabel(node)
	assert.True(t, ok && v == "true", "label %q=%q", ExcludeLabel, v)
	assert.True(t, node.Spec.Unschedulable)
	assert.True(t, recordOf(t, node).Excluded)
	assert.Equal(t, 1, lw.count("excluded the node from external load balancers"))
	awaitDrain(t, c)
	c.stopDrain()
}

// TestHeldTerminationExcludesTheNodeFromLoadBalancers: so does a held
// termination.
func TestHeldTerminationExcludesTheNodeFromLoadBalancers(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	c.now, c.evictor.now = time.Now, time.Now
	c.handle(t.Context(), heldNotice(5*time.Minute, time.Hour))
	v, _ := excludeLabel(f.node(t))
	assert.Equal(t, "true", v)
	c.stopDrain()
}

// TestCordonOnlyAdviceKeepsTheNodeInLoadBalancers: advice that only
// cordons (--on-rebalance=cordon) evicts nothing: the pods still serve,
// and the node stays a backend.
func TestCordonOnlyAdviceKeepsTheNodeInLoadBalancers(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	node := f.node(t)
	require.True(t, node.Spec.Unschedulable)
	_, ok := excludeLabel(node)
	assert.False(t, ok, "cordon-only advice excluded the node from load balancers")
}

// TestClearedDrainAdviceRemovesOurLabel: advice that drains
// (--on-maintenance=drain) excludes the node, and its Cleared removes the
// label with the cordon.
func TestClearedDrainAdviceRemovesOurLabel(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0) // onMaintenance: drain
	log, lw := watchedLogger(t)
	c.log, c.kube.log = log, log
	c.handle(t.Context(), notice(termsig.Maintenance, "scheduled/e-1", t0.Add(time.Hour), t0))
	v, _ := excludeLabel(f.node(t))
	require.Equal(t, "true", v)
	c.handle(t.Context(), notice(termsig.Cleared, "scheduled/e-1", time.Time{}, t0))
	node := f.node(t)
	_, ok := excludeLabel(node)
	assert.False(t, ok, "kubedrain's label stays after the Cleared")
	assert.False(t, node.Spec.Unschedulable)
	assert.NotContains(t, node.Annotations, AnnotationKey)
	assert.Equal(t, 1, lw.count("removed its label"))
}

// TestForeignLabelIsNeverRemoved: a node that has the label before the
// notice (an operator's, an installer's; whatever its value) keeps it as
// it was through the drain and after the Cleared, and the record never
// says it is kubedrain's.
func TestForeignLabelIsNeverRemoved(t *testing.T) {
	for _, value := range []string{"true", "false", ""} {
		t.Run(value, func(t *testing.T) {
			f := newFakeCluster(t, newNode(labelled(value)))
			c := newTestController(t, f, t0)
			log, lw := watchedLogger(t)
			c.log, c.kube.log = log, log
			c.handle(t.Context(), notice(termsig.Maintenance, "scheduled/e-1", t0.Add(time.Hour), t0))
			node := f.node(t)
			got, _ := excludeLabel(node)
			assert.Equal(t, value, got, "kubedrain changed someone else's label")
			assert.False(t, recordOf(t, node).Excluded, "someone else's label recorded as kubedrain's")
			assert.Equal(t, 1, lw.count("has the label already, set by someone else"))
			c.handle(t.Context(), notice(termsig.Cleared, "scheduled/e-1", time.Time{}, t0))
			node = f.node(t)
			got, ok := excludeLabel(node)
			assert.True(t, ok && got == value, "someone else's label removed or changed: %q", got)
			assert.False(t, node.Spec.Unschedulable)
			c.stopDrain()
		})
	}
}

// TestLabelChangedBySomeoneElseIsNoLongerOurs: kubedrain's label that
// someone sets to another value while the drain holds is theirs from
// then on: the Cleared leaves it.
func TestLabelChangedBySomeoneElseIsNoLongerOurs(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Maintenance, "scheduled/e-1", t0.Add(time.Hour), t0))
	operatorPatch(t, f, `{"metadata":{"labels":{"`+ExcludeLabel+`":"false"}}}`)
	c.handle(t.Context(), notice(termsig.Cleared, "scheduled/e-1", time.Time{}, t0))
	v, ok := excludeLabel(f.node(t))
	assert.True(t, ok && v == "false", "the operator's value was removed: %q", v)
	c.stopDrain()
}

// TestLabelRemovedWhileDrainingIsSetAgain: like the taint, kubedrain's
// label removed by someone while the drain holds is set again at
// kubedrain's next write of the node (kubectl uncordon, not the label,
// is how an operator takes the node back).
func TestLabelRemovedWhileDrainingIsSetAgain(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	operatorPatch(t, f, `{"metadata":{"labels":{"`+ExcludeLabel+`":null}}}`)
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	node := f.node(t)
	v, _ := excludeLabel(node)
	assert.Equal(t, "true", v)
	assert.True(t, recordOf(t, node).Excluded)
	awaitDrain(t, c)
	c.stopDrain()
}

// TestKubectlUncordonRemovesOurLabel: kubectl uncordon while kubedrain
// drains for an imminent notice lifts its reasons: at its next write
// kubedrain removes its taint, and its label with it.
func TestKubectlUncordonRemovesOurLabel(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	operatorPatch(t, f, `{"spec":{"unschedulable":null}}`)
	c.handle(t.Context(), notice(termsig.Cleared, "rebalance", time.Time{}, t0)) // any later write
	node := f.node(t)
	_, ok := excludeLabel(node)
	assert.False(t, ok, "kubedrain's label stays after kubectl uncordon")
	assert.False(t, recordOf(t, node).Excluded)
	awaitDrain(t, c)
	c.stopDrain()
}

// TestNodeBackFromRebootLosesOurLabel: a kubedrain that starts on a node
// an earlier one drained for an imminent notice, under another boot (the
// machine was stopped and is back), lifts its cordon and removes its
// label; someone else's label stays.
func TestNodeBackFromRebootLosesOurLabel(t *testing.T) {
	spot := reason{Source: "imds", Event: "spot/instance-action", Kind: termsig.Terminate, Deadline: t0.Add(2 * time.Minute), Drain: true}
	for _, tc := range []struct {
		name     string
		excluded bool // the record says the label is kubedrain's
		want     bool // the label stays
	}{
		{"kubedrain's", true, false},
		{"someone else's", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, recorded(t, record{Cordoned: true, Reasons: []reason{spot}, BootID: "boot-0", Excluded: tc.excluded}, labelled("true")))
			c := newTestController(t, f, t0)
			assert.False(t, c.reconcile(t.Context()))
			node := f.node(t)
			assert.False(t, node.Spec.Unschedulable)
			_, ok := excludeLabel(node)
			assert.Equal(t, tc.want, ok)
		})
	}
}

// TestLabelWriteConflictRetried: the label is part of the node write:
// a conflict (someone wrote the node in between) reads the node again
// and writes the label with the cordon.
func TestLabelWriteConflictRetried(t *testing.T) {
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
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	assert.Zero(t, conflicts)
	v, _ := excludeLabel(f.node(t))
	assert.Equal(t, "true", v)
	awaitDrain(t, c)
	c.stopDrain()
}

func TestNodePatchLabel(t *testing.T) {
	spot := reason{Source: "imds", Event: "spot/instance-action", Kind: termsig.Terminate, Drain: true}
	t.Run("set with the cordon", func(t *testing.T) {
		rec := record{Reasons: []reason{spot}}
		p, err := nodePatch(newNode(), &rec)
		require.NoError(t, err)
		assert.Contains(t, string(p), `"labels":{"`+ExcludeLabel+`":"true"}`)
		assert.True(t, rec.Excluded)
	})
	t.Run("removed with the last reason", func(t *testing.T) {
		rec := record{Cordoned: true, Reasons: []reason{spot}, Excluded: true}
		n := recorded(t, rec, labelled("true"))
		p, err := nodePatch(n, &record{Cordoned: true, Excluded: true})
		require.NoError(t, err)
		assert.JSONEq(t, `{"metadata":{"resourceVersion":"","annotations":{"`+AnnotationKey+`":null},"labels":{"`+ExcludeLabel+`":null}},"spec":{"unschedulable":null,"taints":[]}}`, string(p))
	})
	t.Run("someone else's is not in the patch", func(t *testing.T) {
		rec := record{Reasons: []reason{spot}}
		p, err := nodePatch(newNode(labelled("")), &rec)
		require.NoError(t, err)
		assert.NotContains(t, string(p), `"labels"`)
		assert.False(t, rec.Excluded)
	})
}

// TestLoadBalancerLabelOnTheAPIServer: kubedrain as a separate process,
// with the RBAC of deploy/ (a node patch), against a real API server:
// advice that drains (--on-rebalance=drain) labels the node and its
// withdrawal removes the label; a spot interruption labels it again, and
// the kubedrain that starts once the machine is back (another boot ID,
// the interruption gone) removes it as it lifts the cordon.
func TestLoadBalancerLabelOnTheAPIServer(t *testing.T) {
	c, kubeconfig := setupCluster(t)
	client := c.Client
	srv := imdstest.NewServer()
	defer srv.Close()
	args := []string{"--imds-interval", "20ms", "--imds-advisory-interval", "20ms", "--on-rebalance", "drain"}
	kd := startKubedrain(t, kubeconfig, srv.URL, args...)

	isOurs := func(n *corev1.Node) bool {
		v, ok := excludeLabel(n)
		rec, err := readRecord(n)
		return ok && v == "true" && err == nil && rec.Excluded
	}
	unlabelled := func(n *corev1.Node) bool { _, ok := excludeLabel(n); return !ok }
	srv.SetRebalance(time.Now())
	untilNode(t, client, "labelled and cordoned for the rebalance drain", func(n *corev1.Node) bool {
		return isOurs(n) && n.Spec.Unschedulable && hasTaint(n, "rebalance")
	})
	srv.ClearRebalance()
	untilNode(t, client, "the label gone with the cordon", func(n *corev1.Node) bool {
		return unlabelled(n) && !n.Spec.Unschedulable
	})

	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	untilNode(t, client, "labelled and cordoned for the interruption", func(n *corev1.Node) bool {
		return isOurs(n) && n.Spec.Unschedulable && hasTaint(n, "terminate")
	})
	kd.stop(t)
	// The machine went through the interruption (a stop) and is back.
	srv.ClearInterruption()
	setBootID(t, client, "boot-2")
	startKubedrain(t, kubeconfig, srv.URL, args...)
	node := untilNode(t, client, "the label gone with the cordon of the earlier boot", func(n *corev1.Node) bool {
		return unlabelled(n) && !n.Spec.Unschedulable
	})
	assert.NotContains(t, node.Annotations, AnnotationKey)
}

// TestForeignLoadBalancerLabelKeptOnTheAPIServer: on a real API server,
// a node that has the label before a spot interruption (an operator's)
// keeps it, as it was, after kubedrain has let the node go.
func TestForeignLoadBalancerLabelKeptOnTheAPIServer(t *testing.T) {
	c, kubeconfig := setupCluster(t)
	client := c.Client
	_, err := client.CoreV1().Nodes().Patch(t.Context(), testNode, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+ExcludeLabel+`":"true"}}}`), metav1.PatchOptions{FieldManager: "kubectl-label"})
	require.NoError(t, err)
	srv := imdstest.NewServer()
	defer srv.Close()
	kd := startKubedrain(t, kubeconfig, srv.URL, "--imds-interval", "20ms")
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	node := untilNode(t, client, "cordoned for the interruption", func(n *corev1.Node) bool {
		return n.Spec.Unschedulable && hasTaint(n, "terminate")
	})
	assert.False(t, recordOf(t, node).Excluded, "someone else's label recorded as kubedrain's")
	kd.await(t, "kubedrain: the node has the label already")
	kd.stop(t)

	srv.ClearInterruption()
	setBootID(t, client, "boot-2")
	startKubedrain(t, kubeconfig, srv.URL, "--imds-interval", "20ms")
	node = untilNode(t, client, "uncordoned once the machine is back", func(n *corev1.Node) bool {
		_, annotated := n.Annotations[AnnotationKey]
		return !n.Spec.Unschedulable && !annotated
	})
	v, ok := excludeLabel(node)
	assert.True(t, ok && v == "true", "the operator's label was removed or changed: %q", v)
}

// setBootID sets the node's boot ID, as its kubelet does once the
// machine has started again.
func setBootID(t *testing.T, client kubernetes.Interface, boot string) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(t.Context(), testNode, metav1.GetOptions{})
	require.NoError(t, err)
	n.Status.NodeInfo.BootID = boot
	_, err = client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/termsig/termsig/imds/imdstest"
)

// TestOperatorRecordonKeptOnTheAPIServer: on the real API server, where a
// Node may come without managedFields (and updates then never add them),
// an operator who uncordons and cordons the node again while kubedrain
// holds it keeps that cordon when the advice clears: kubedrain starts the
// field tracking with an apply when it cordons. (Found by review.)
func TestOperatorRecordonKeptOnTheAPIServer(t *testing.T) {
	c, kubeconfig := setupCluster(t)
	client := c.Client
	srv := imdstest.NewServer()
	defer srv.Close()
	startKubedrain(t, kubeconfig, srv.URL, "--imds-interval", "20ms", "--imds-advisory-interval", "20ms")
	srv.SetRebalance(time.Now())
	untilNode(t, client, "cordoned for rebalance, its fields tracked", func(n *corev1.Node) bool {
		return n.Spec.Unschedulable && hasTaint(n, "rebalance") && len(n.ManagedFields) > 0
	})
	patch := func(p string) {
		_, err := client.CoreV1().Nodes().Patch(t.Context(), testNode, types.StrategicMergePatchType, []byte(p),
			metav1.PatchOptions{FieldManager: "kubectl-cordon"})
		require.NoError(t, err)
	}
	patch(`{"spec":{"unschedulable":null}}`) // kubectl uncordon
	patch(`{"spec":{"unschedulable":true}}`) // kubectl cordon
	n, err := client.CoreV1().Nodes().Get(t.Context(), testNode, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, ownsCordon(n), "kubedrain thinks it owns the operator's cordon")
	srv.ClearRebalance()
	// The taint may go before the Cleared, if kubedrain writes the node
	// in between: it then sees the operator's uncordon and lifts its
	// reason. The annotation goes with the Cleared.
	node := untilNode(t, client, "kubedrain's marks gone", func(n *corev1.Node) bool {
		_, annotated := n.Annotations[AnnotationKey]
		return !hasTaint(n, "rebalance") && !annotated
	})
	assert.True(t, node.Spec.Unschedulable, "kubedrain lifted the operator's cordon")
	assert.NotContains(t, node.Annotations, AnnotationKey)
}

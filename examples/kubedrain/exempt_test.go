package main

// Tests of --pod-selector-exempt: the pods it selects are left on the
// node, neither evicted nor waited for.

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/termsigtest"
)

func withLabels(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func TestParseExempt(t *testing.T) {
	for _, s := range []string{"", "  "} {
		sel, err := parseExempt(s)
		assert.NoError(t, err)
		assert.Nil(t, sel, "%q must select no pod, not every pod", s)
	}
	sel, err := parseExempt("app=cache,tier in (edge),!canary")
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set{"app": "cache", "tier": "edge"}))
	assert.False(t, sel.Matches(labels.Set{"app": "cache", "tier": "edge", "canary": "1"}))
	assert.False(t, sel.Matches(labels.Set{"app": "web"}))
}

// TestBadExemptSelectorIsAUsageError: a selector that does not parse
// stops kubedrain at start with exit status 2 and the usage line, before
// it talks to anything.
func TestBadExemptSelectorIsAUsageError(t *testing.T) {
	for _, bad := range []string{"app in (", "a b", "=x", "app==x==y", "app=-bad-", ","} {
		t.Run(bad, func(t *testing.T) {
			var stderr strings.Builder
			code := realMain([]string{"--node", "n", "--pod-selector-exempt", bad}, &strings.Builder{}, &stderr)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr.String(), "kubedrain: --pod-selector-exempt: ")
			assert.Contains(t, stderr.String(), usageLine)
		})
	}
}

// TestSkipOfExempt: a pod the selector matches is exempt, unless another
// reason leaves it already (a DaemonSet pod counts as one).
func TestSkipOfExempt(t *testing.T) {
	sel, err := parseExempt("app=cache")
	require.NoError(t, err)
	e := &evictor{kube: &kube{node: testNode}, exempt: sel}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want skip
	}{
		{newPod("ns", "cache", withLabels("app", "cache")), skipExempt},
		{newPod("ns", "web", withLabels("app", "web")), ""},
		{newPod("ns", "unlabelled"), ""},
		{newPod("ns", "cache-agent", withLabels("app", "cache"), ownedBy("DaemonSet")), skipDaemonSet},
		{newPod("ns", "cache-done", withLabels("app", "cache"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), skipFinished},
	} {
		t.Run(tc.pod.Name, func(t *testing.T) { assert.Equal(t, tc.want, e.skipOf(tc.pod)) })
	}
}

// TestExemptPodsAreNotEvicted: with the fake clientset, exempt pods get
// no eviction attempt, the others are evicted, the drain says once how
// many it left, and the Drained Event counts them.
func TestExemptPodsAreNotEvicted(t *testing.T) {
	f := newFakeCluster(t, newNode(),
		newPod("ns", "cache-1", withLabels("app", "cache")),
		newPod("ns", "cache-2", withLabels("app", "cache"), ownedBy("ReplicaSet")),
		newPod("ns", "web", withLabels("app", "web")),
	)
	c := newTestController(t, f, t0)
	var err error
	c.evictor.exempt, err = parseExempt("app=cache")
	require.NoError(t, err)
	log, lw := watchedLogger(t)
	c.log, c.kube.log = log, log
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", t0.Add(2*time.Minute), t0))
	awaitDrain(t, c)
	c.stopDrain()
	assert.Equal(t, map[string]int64{"ns/web": 30}, f.evicted())
	assert.Zero(t, f.attemptsOf("ns/cache-1")+f.attemptsOf("ns/cache-2"), "an exempt pod's eviction was tried")
	assert.Equal(t, 1, lw.count("leaving the pods exempt by --pod-selector-exempt"))
	assert.Equal(t, 1, lw.count("pods=2"))
	list, err := f.EventsV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var notes []string
	for _, e := range list.Items {
		if e.Reason == "Drained" {
			notes = append(notes, e.Note)
		}
	}
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "(2 exempt by --pod-selector-exempt)")
}

// TestExemptPodsLeftOnTheAPIServer: kubedrain as a separate process, with
// the RBAC of deploy/ and --pod-selector-exempt, against a real API
// server: a spot interruption evicts the pods the selector does not
// match, and leaves those it matches, whatever owns them.
func TestExemptPodsLeftOnTheAPIServer(t *testing.T) {
	c, kubeconfig := setupCluster(t)
	client := c.Client
	for _, p := range []*corev1.Pod{
		newPod("work", "cache", withLabels("app", "cache")),
		newPod("work", "cache-rs", withLabels("app", "cache", "pod-template-hash", "x"), ownedBy("ReplicaSet")),
		newPod("work", "web", withLabels("app", "web")),
		newPod("work", "plain"),
	} {
		createRunningPod(t, client, p)
	}
	srv := imdstest.NewServer()
	defer srv.Close()
	kd := startKubedrain(t, kubeconfig, srv.URL, "--imds-interval", "20ms", "--pod-selector-exempt", "app=cache")
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	untilPods(t, client, "work", "the others evicted", terminating("work/web", "work/plain"))
	line := kd.await(t, "kubedrain: leaving the pods exempt by --pod-selector-exempt")
	assert.Equal(t, float64(2), line["pods"])
	assert.Equal(t, "app=cache", line["selector"])
	done := kd.await(t, "kubedrain: drain done")
	assert.Equal(t, float64(2), done["exempt"])
	for _, name := range []string{"cache", "cache-rs"} {
		p, err := client.CoreV1().Pods("work").Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, p.DeletionTimestamp, "the exempt pod work/%s was evicted", name)
	}
}

// TestHeldTerminationIsReleasedWithoutWaitingForExemptPods: against a
// real API server, a held termination waits for the pods it evicted to be
// gone before it releases the hold, not for the exempt ones, which are
// still running when it does.
func TestHeldTerminationIsReleasedWithoutWaitingForExemptPods(t *testing.T) {
	cl, _ := setupCluster(t)
	for _, p := range []*corev1.Pod{
		newPod("work", "web", grace(20)),
		newPod("work", "cache", withLabels("app", "cache")),
	} {
		createRunningPod(t, cl.Client, p)
	}
	client, err := kubernetes.NewForConfig(cl.ServiceAccountConfig(t, "kube-system", "kubedrain"))
	require.NoError(t, err)
	log, _ := watchedLogger(t)
	exempt, err := parseExempt("app=cache")
	require.NoError(t, err)
	o := &options{node: testNode, margin: 10 * time.Second, fallback: 2 * time.Minute, maxHold: time.Hour,
		onRebalance: cordon, onMaintenance: cordon, exempt: exempt,
		self: types.NamespacedName{Namespace: "kube-system", Name: "kubedrain-self"}}
	c := newController(o, client, log)
	c.evictor.goneEvery = 50 * time.Millisecond
	asg := &recorder{Fake: termsigtest.NewFake("asg"), released: make(chan termsig.Notice, 1)}
	runController(t, c, asg)

	send(t, asg.Fake, heldNotice(5*time.Minute, time.Hour))
	untilPods(t, cl.Client, "work", "the web pod evicted", terminating("work/web"))
	deletePods(t, cl.Client, "work/web") // as its kubelet does, once it has stopped
	select {
	case nt := <-asg.released:
		assert.True(t, nt.Held)
	case <-time.After(30 * time.Second):
		t.Fatal("the hold was not released once the evicted pod was gone: it waits for the exempt one")
	}
	p, err := cl.Client.CoreV1().Pods("work").Get(t.Context(), "cache", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, p.DeletionTimestamp, "the exempt pod was evicted")
	assert.Equal(t, corev1.PodRunning, p.Status.Phase)
}

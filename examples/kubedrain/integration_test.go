package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/termsig/termsig/examples/kubedrain/internal/kubetest"
	"github.com/termsig/termsig/imds/imdstest"
)

// buildKubedrain builds the kubedrain binary once per test binary.
var buildKubedrain = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "kubedrain-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kubedrain")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// applyManifest creates the objects of a YAML file of deploy/.
func applyManifest(t testing.TB, client kubernetes.Interface, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("deploy", file))
	require.NoError(t, err)
	ctx := t.Context()
	for _, doc := range strings.Split(string(b), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		require.NoError(t, err, "%s", file)
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.DaemonSet:
			_, err = client.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("%s: unexpected %T", file, obj)
		}
		require.NoError(t, err, "%s", file)
	}
}

// A kubedrainProc is kubedrain run as a separate process.
type kubedrainProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when its log is read to the end
	mu   sync.Mutex
	log  []map[string]any
	seen chan struct{} // closed and replaced at each log line
	raw  bytes.Buffer
}

// startKubedrain runs kubedrain for testNode against the API server of
// kubeconfig and the fake IMDS at imdsURL.
func startKubedrain(t testing.TB, kubeconfig, imdsURL string, args ...string) *kubedrainProc {
	t.Helper()
	bin, err := buildKubedrain()
	require.NoError(t, err)
	args = append([]string{"--node", testNode, "--kubeconfig", kubeconfig, "--sources", "imds",
		"--log-level", "debug"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "AWS_EC2_METADATA_SERVICE_ENDPOINT="+imdsURL,
		"POD_NAMESPACE=kube-system", "POD_NAME=kubedrain-self", "NODE_NAME=")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &kubedrainProc{cmd: cmd, done: make(chan struct{}), seen: make(chan struct{})}
	go p.read(stderr)
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("kubedrain's log:\n%s", p.raw.String())
		}
	})
	p.await(t, "kubedrain: watching")
	return p
}

func (p *kubedrainProc) read(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		_ = json.Unmarshal(sc.Bytes(), &line) // a line that is not JSON is kept raw
		p.mu.Lock()
		p.raw.Write(sc.Bytes())
		p.raw.WriteByte('\n')
		if line != nil {
			p.log = append(p.log, line)
		}
		close(p.seen)
		p.seen = make(chan struct{})
		p.mu.Unlock()
	}
}

// await waits for a log line whose msg starts with msg, and returns it.
func (p *kubedrainProc) await(t testing.TB, msg string) map[string]any {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for i := 0; ; {
		p.mu.Lock()
		for ; i < len(p.log); i++ {
			if m, _ := p.log[i]["msg"].(string); strings.HasPrefix(m, msg) {
				line := p.log[i]
				p.mu.Unlock()
				return line
			}
		}
		seen := p.seen
		p.mu.Unlock()
		select {
		case <-seen:
		case <-p.done:
			t.Fatalf("kubedrain exited before logging %q", msg)
		case <-timeout:
			t.Fatalf("kubedrain did not log %q", msg)
		}
	}
}

// stop sends kubedrain SIGTERM and waits for it: it must exit 0.
func (p *kubedrainProc) stop(t testing.TB) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Error("kubedrain did not exit within 10 s of SIGTERM")
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("kubedrain: %v", err)
	}
}

// untilNode waits until cond holds for testNode, watching it.
func untilNode(t testing.TB, client kubernetes.Interface, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sel := fields.OneTermEqualSelector("metadata.name", testNode).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return client.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	ev, err := watchtools.UntilWithSync(ctx, lw, &corev1.Node{}, nil, func(e watch.Event) (bool, error) {
		n, ok := e.Object.(*corev1.Node)
		return ok && cond(n), nil
	})
	if err != nil {
		n, gerr := client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
		t.Fatalf("waiting for the node: %s: %v; the node: %+v %v", what, err, n.Spec, gerr)
	}
	return ev.Object.(*corev1.Node)
}

// untilPods waits until cond holds for the pods of namespace ns.
func untilPods(t testing.TB, client kubernetes.Interface, ns, what string, cond func([]corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "pods", ns, fields.Everything())
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	var pods []corev1.Pod
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, func(s cache.Store) (bool, error) {
		store = s
		return check(s, cond, &pods), nil
	}, func(watch.Event) (bool, error) { return check(store, cond, &pods), nil })
	require.NoError(t, err, "waiting for the pods: %s", what)
	return pods
}

func check(s cache.Store, cond func([]corev1.Pod) bool, out *[]corev1.Pod) bool {
	var pods []corev1.Pod
	for _, o := range s.List() {
		pods = append(pods, *o.(*corev1.Pod))
	}
	*out = pods
	return cond(pods)
}

func byName(pods []corev1.Pod) map[string]corev1.Pod {
	m := map[string]corev1.Pod{}
	for _, p := range pods {
		m[p.Namespace+"/"+p.Name] = p
	}
	return m
}

// terminating reports whether the named pods all have a deletion
// timestamp.
func terminating(names ...string) func([]corev1.Pod) bool {
	return func(pods []corev1.Pod) bool {
		m := byName(pods)
		for _, n := range names {
			if p, ok := m[n]; !ok || p.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	}
}

// createRunningPod creates pod bound to testNode and marks it Running and
// Ready, as a kubelet would: the API server lets a Pending pod go
// without asking its budget.
func createRunningPod(t testing.TB, client kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	ctx := t.Context()
	pod.UID = ""
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}
	}
	created, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
	_, err = client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// setBudget sets the status of the budget as the disruption controller
// would, allowing n disruptions.
func setBudget(t testing.TB, client kubernetes.Interface, ns, name string, n int32) {
	t.Helper()
	pdb, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	pdb.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptionsAllowed: n,
		CurrentHealthy:     1 + n,
		DesiredHealthy:     1,
		ExpectedPods:       1 + n,
	}
	_, err = client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(t.Context(), pdb, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// setupCluster starts an API server with kubedrain's RBAC applied, a
// namespace "work" and testNode, and returns it with a kubeconfig for
// kubedrain's service account.
func setupCluster(t testing.TB) (*kubetest.Cluster, string) {
	t.Helper()
	c := kubetest.Start(t)
	applyManifest(t, c.Client, "rbac.yaml")
	_, err := c.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Client.CoreV1().Nodes().Create(t.Context(), newNode(), metav1.CreateOptions{})
	require.NoError(t, err)
	return c, c.Kubeconfig(t, c.ServiceAccountConfig(t, "kube-system", "kubedrain"))
}

// TestAgainstAPIServer runs kubedrain, as a separate process with the
// RBAC of deploy/, against a real kube-apiserver and a fake IMDS: a
// rebalance recommendation cordons the node and its withdrawal lifts the
// cordon; a spot interruption cordons, taints, records an Event and
// evicts the pods that should go, with grace periods capped by the
// deadline, and the pod behind a PodDisruptionBudget once the budget
// allows it.
func TestAgainstAPIServer(t *testing.T) {
	c, kubeconfig := setupCluster(t)
	client := c.Client
	// The DaemonSet of deploy/ is valid for the API server (no controller
	// runs here to start its pods).
	applyManifest(t, client, "daemonset.yaml")
	mirror := func(p *corev1.Pod) { p.Annotations = map[string]string{mirrorAnnotation: "hash"} }
	for _, p := range []*corev1.Pod{
		newPod("work", "plain"),
		newPod("work", "slow", ownedBy("ReplicaSet"), grace(600)),
		newPod("work", "quick", grace(5)),
		newPod("work", "guarded", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "guarded"} }),
		newPod("kube-system", "agent", ownedBy("DaemonSet")),
		newPod("kube-system", "static", mirror),
		newPod("kube-system", "kubedrain-self"),
	} {
		createRunningPod(t, client, p)
	}
	_, err := client.PolicyV1().PodDisruptionBudgets("work").Create(t.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "work"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: new(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	setBudget(t, client, "work", "guarded", 0)

	srv := imdstest.NewServer()
	defer srv.Close()
	kd := startKubedrain(t, kubeconfig, srv.URL, "--imds-interval", "20ms", "--imds-advisory-interval", "20ms")

	// Advice: rebalance → cordon → withdrawn → uncordon.
	srv.SetRebalance(time.Now())
	untilNode(t, client, "cordoned for rebalance", func(n *corev1.Node) bool {
		return n.Spec.Unschedulable && hasTaint(n, "rebalance")
	})
	srv.ClearRebalance()
	node := untilNode(t, client, "uncordoned", func(n *corev1.Node) bool {
		return !n.Spec.Unschedulable && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintKey })
	})
	assert.NotContains(t, node.Annotations, AnnotationKey)
	// The API server's own taint (TaintNodesByCondition) is left alone.
	assert.Equal(t, []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}, node.Spec.Taints)

	// A spot interruption two minutes ahead.
	deadline := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	srv.SetInterruption("terminate", deadline)
	node = untilNode(t, client, "cordoned for the interruption", func(n *corev1.Node) bool {
		return n.Spec.Unschedulable && hasTaint(n, "terminate")
	})
	rec, err := readRecord(node)
	require.NoError(t, err)
	assert.True(t, rec.Cordoned)
	pods := untilPods(t, client, "", "evictions", terminating("work/plain", "work/slow", "work/quick"))
	evictedAt := time.Now()
	m := byName(pods)
	assert.Equal(t, int64(30), *m["work/plain"].DeletionGracePeriodSeconds)
	assert.Equal(t, int64(5), *m["work/quick"].DeletionGracePeriodSeconds)
	// 600 s capped to the 2 minutes left less the 10 s margin, less the
	// time the drain took to start.
	capped := *m["work/slow"].DeletionGracePeriodSeconds
	assert.LessOrEqual(t, capped, int64(deadline.Sub(evictedAt.Add(-5*time.Second))/time.Second)-10)
	assert.GreaterOrEqual(t, capped, int64(deadline.Sub(evictedAt)/time.Second)-11)

	// The budget refuses until it allows a disruption.
	kd.await(t, "kubedrain: eviction refused")
	for _, n := range []string{"work/guarded", "kube-system/agent", "kube-system/static", "kube-system/kubedrain-self"} {
		assert.Nil(t, m[n].DeletionTimestamp, "%s must stay", n)
	}
	setBudget(t, client, "work", "guarded", 1)
	untilPods(t, client, "work", "the guarded pod evicted", terminating("work/guarded"))
	kd.await(t, "kubedrain: drain done")

	evs, err := client.EventsV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var actions []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == testNode {
			actions = append(actions, e.Action+"/"+e.Reason)
		}
	}
	assert.Subset(t, actions, []string{"Cordon/TerminationNotice", "Uncordon/TerminationNoticeCleared", "Drain/TerminationNotice", "Drain/Drained"})
	pods = untilPods(t, client, "kube-system", "listing", func([]corev1.Pod) bool { return true })
	for _, p := range pods {
		assert.Nil(t, p.DeletionTimestamp, "%s/%s must stay", p.Namespace, p.Name)
	}
}

// TestRestartContinuesDrain: a kubedrain that starts on a node an
// earlier one cordoned for a spot interruption that still holds evicts
// the pods that are still there.
func TestRestartContinuesDrain(t *testing.T) {
	c, kubeconfig := setupCluster(t)
	srv := imdstest.NewServer()
	defer srv.Close()
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	kd := startKubedrain(t, kubeconfig, srv.URL, "--imds-interval", "20ms")
	untilNode(t, c.Client, "cordoned", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	kd.await(t, "kubedrain: drain done")
	kd.stop(t)

	// A pod that landed meanwhile (it tolerates the taint).
	createRunningPod(t, c.Client, newPod("work", "late"))
	startKubedrain(t, kubeconfig, srv.URL, "--imds-interval", "20ms")
	untilPods(t, c.Client, "work", "the late pod evicted", terminating("work/late"))
	node, err := c.Client.CoreV1().Nodes().Get(t.Context(), testNode, metav1.GetOptions{})
	require.NoError(t, err)
	rec, err := readRecord(node)
	require.NoError(t, err)
	assert.True(t, rec.Cordoned, "the cordon is still kubedrain's")
}

func hasTaint(n *corev1.Node, value string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == TaintKey && t.Value == value && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// TestOperatorRecordonKeptOnTheAPIServer: on the real API server, where a
// Node may come without managedFields (and updates then never add them),
// an operator who uncordons and cordons the node again while kubedrain
// holds it keeps that cordon when the advice clears: kubedrain starts the
// field tracking with an apply when it cordons.
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

// A silencer is a TCP proxy whose connections can be made silently dead
// (half-open: a load balancer's failover, an API server instance gone
// without a reset); connections opened afterwards work.
type silencer struct {
	l     net.Listener
	mu    sync.Mutex
	flags []*atomic.Bool
}

func newSilencer(t *testing.T, target string) *silencer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &silencer{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			dead := &atomic.Bool{}
			s.mu.Lock()
			s.flags = append(s.flags, dead)
			s.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				defer dst.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 && !dead.Load() {
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	return s
}

// silence makes every connection so far silently dead.
func (s *silencer) silence() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.flags {
		f.Store(true)
	}
}

// TestEvictionsSurviveAHalfOpenConnection: when kubedrain's connection to
// the API server goes silently dead mid-drain, the evictions go on over a
// new connection within seconds, not after client-go's HTTP/2 health
// check (30 s idle + 15 s ping: ~45 s of a spot interruption's 110 s).
func TestEvictionsSurviveAHalfOpenConnection(t *testing.T) {
	c, _ := setupCluster(t)
	cfg := c.ServiceAccountConfig(t, "kube-system", "kubedrain")
	u, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	s := newSilencer(t, u.Host)
	pc := rest.CopyConfig(cfg)
	pc.Host = "https://" + s.l.Addr().String()
	kubeconfig := c.Kubeconfig(t, pc)

	createRunningPod(t, c.Client, newPod("work", "guarded", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "guarded"} }))
	_, err = c.Client.PolicyV1().PodDisruptionBudgets("work").Create(t.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "work"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: new(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	setBudget(t, c.Client, "work", "guarded", 0)
	srv := imdstest.NewServer()
	defer srv.Close()
	kd := startKubedrain(t, kubeconfig, srv.URL, "--imds-interval", "20ms")
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	kd.await(t, "kubedrain: eviction refused")
	s.silence()
	setBudget(t, c.Client, "work", "guarded", 1)
	start := time.Now()
	untilPods(t, c.Client, "work", "the guarded pod evicted", terminating("work/guarded"))
	assert.Less(t, time.Since(start), 20*time.Second,
		"the guarded pod evicted long after its budget allowed it: the drain was stuck on a dead connection")
}

package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typedpolicyv1 "k8s.io/client-go/kubernetes/typed/policy/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/termsig/termsig"
)

func TestMain(m *testing.M) {
	// client-go's informers log through klog when a watch ends with the
	// test's context: noise, not news.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(removingBuild{m})
}

// removingBuild runs the tests, then removes the kubedrain binary that
// the integration tests built, if they did.
type removingBuild struct{ m *testing.M }

func (r removingBuild) Run() int {
	code := r.m.Run()
	if bin, err := buildKubedrain(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	return code
}

const testNode = "node-1"

// A fakeCluster is client-go's fake clientset with a recorder of
// evictions in front of it.
type fakeCluster struct {
	*fake.Clientset
	mu        sync.Mutex
	evictions map[string]int64 // pod "ns/name" -> grace period
	refuse    map[string]bool  // pods whose evictions answer 429
	attempts  map[string]int
	changed   chan struct{} // closed and replaced at each eviction attempt
}

func newFakeCluster(t *testing.T, objs ...runtime.Object) *fakeCluster {
	t.Helper()
	f := &fakeCluster{
		Clientset: fake.NewClientset(objs...),
		evictions: map[string]int64{},
		refuse:    map[string]bool{},
		attempts:  map[string]int{},
		changed:   make(chan struct{}),
	}
	f.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		name := ev.Namespace + "/" + ev.Name
		f.mu.Lock()
		defer f.mu.Unlock()
		f.attempts[name]++
		close(f.changed)
		f.changed = make(chan struct{})
		if f.refuse[name] {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		grace := *ev.DeleteOptions.GracePeriodSeconds
		f.evictions[name] = grace
		// As the API server does: the pod is now terminating, with that
		// grace period.
		gvr := corev1.SchemeGroupVersion.WithResource("pods")
		if o, err := f.Tracker().Get(gvr, ev.Namespace, ev.Name); err == nil {
			pod := o.(*corev1.Pod)
			now := metav1.Now()
			pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, &grace
			if err := f.Tracker().Update(gvr, pod, ev.Namespace); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	return f
}

// attemptsOf returns how many times pod's eviction was tried.
func (f *fakeCluster) attemptsOf(pod string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[pod]
}

// setRefuse makes the evictions of pod answer 429, or accepts them again.
func (f *fakeCluster) setRefuse(pod string, refuse bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse[pod] = refuse
}

// awaitAttempts waits until pod's eviction has been tried n times.
func (f *fakeCluster) awaitAttempts(t *testing.T, pod string, n int) {
	t.Helper()
	if !awaitAttemptsWithin(f, pod, n, 10*time.Second) {
		t.Fatalf("%s: %d eviction attempts, want %d", pod, f.attemptsOf(pod), n)
	}
}

// awaitAttemptsWithin waits at most d for pod's eviction to be tried n
// times, and reports whether it was.
func awaitAttemptsWithin(f *fakeCluster, pod string, n int, d time.Duration) bool {
	timeout := time.After(d)
	for {
		f.mu.Lock()
		got, ch := f.attempts[pod], f.changed
		f.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-ch:
		case <-timeout:
			return false
		}
	}
}

func (f *fakeCluster) evicted() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.evictions)
}

func (f *fakeCluster) node(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := f.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

// events returns the actions of the Events kubedrain recorded.
func (f *fakeCluster) events(t *testing.T) []string {
	t.Helper()
	list, err := f.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Action+"/"+e.Reason)
	}
	slices.Sort(out)
	return out
}

func newNode(mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	n.Status.NodeInfo.BootID = "boot-1"
	for _, m := range mods {
		m(n)
	}
	return n
}

func newPod(ns, name string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)},
		Spec:       corev1.PodSpec{NodeName: testNode},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func ownedBy(kind string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: kind, Name: "owner", UID: "owner-uid", Controller: new(true),
		}}
	}
}

func grace(s int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s }
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newTestController returns a controller for testNode with short waits
// and a clock that stands at now.
func newTestController(t *testing.T, f *fakeCluster, now time.Time) *controller {
	t.Helper()
	log := testLogger(t)
	o := &options{node: testNode, margin: 10 * time.Second, fallback: time.Minute, maxHold: time.Hour,
		onRebalance: cordon, onMaintenance: drain,
		self: types.NamespacedName{Namespace: "kube-system", Name: "kubedrain-abcde"}}
	c := newController(o, f, log)
	c.now = func() time.Time { return now }
	c.evictor.now = c.now
	c.evictor.backoff, c.evictor.maxBackoff = time.Millisecond, 5*time.Millisecond
	c.retry = time.Millisecond
	c.writeTimeout = 5 * time.Second
	c.minDrain = 200 * time.Millisecond
	c.cordonWait = 100 * time.Millisecond
	return c
}

// notice returns a notice of kind k from the imds source, for event ev.
func notice(k termsig.Kind, ev string, deadline, observed time.Time) termsig.Notice {
	return termsig.Notice{Source: "imds", Kind: k, Event: ev, Deadline: deadline, Observed: observed, Reason: k.String()}
}

// awaitDrain waits for the drain under way to end.
func awaitDrain(t *testing.T, c *controller) {
	t.Helper()
	require.NotNil(t, c.drain, "no drain under way")
	select {
	case <-c.drain.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain did not end")
	}
}

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

// syncBuffer is a bytes.Buffer safe for the drain goroutine's logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

package main

// Tests of held terminations (an Auto Scaling termination hook): the drain
// goes by the hold's end, and releases the hold once the pods are gone.

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/termsigtest"
)

// heldNotice is an Auto Scaling termination hook's notice, from source
// "asg": the instance is held until released, for in as the hold stands,
// and at most until limit from now.
func heldNotice(in, limit time.Duration) termsig.Notice {
	now := time.Now()
	return termsig.Notice{
		Source: "asg", Kind: termsig.Terminate, Event: "lifecycle/terminate", Reason: "scale-in: termination hook",
		Deadline: now.Add(in), Observed: now, Held: true, HoldLimit: now.Add(limit),
	}
}

// A logWatch keeps the log lines written to it, so that a test can wait
// for one.
type logWatch struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
}

func newLogWatch() *logWatch { return &logWatch{changed: make(chan struct{})} }

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

// count returns how many lines hold s.
func (l *logWatch) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// await waits for a line that holds s.
func (l *logWatch) await(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if l.count(s) > 0 {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no log line with %q", s)
		}
	}
}

// watchedLogger logs as testLogger does, and into the logWatch it returns.
func watchedLogger(t *testing.T) (*slog.Logger, *logWatch) {
	lw := newLogWatch()
	return slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), lw), &slog.HandlerOptions{Level: slog.LevelDebug})), lw
}

// A recorder is a termsigtest.Fake whose releases also go on a channel,
// so that a test can wait for one.
type recorder struct {
	*termsigtest.Fake
	released chan termsig.Notice
}

func (r *recorder) Release(ctx context.Context, nt termsig.Notice) error {
	r.released <- nt
	return r.Fake.Release(ctx, nt)
}

// runController runs c's loop on the notices of srcs, with Release of
// their Notifier, until the test ends or stop is called; stop returns
// once the loop and its releases are over.
func runController(t *testing.T, c *controller, srcs ...termsig.Source) (stop func()) {
	t.Helper()
	n := termsig.Config{Logger: c.log}.New(srcs...)
	c.release = n.Release
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run(ctx, n.C(), n.Ready())
	}()
	stop = sync.OnceFunc(func() {
		cancel()
		<-done
		n.Stop()
	})
	t.Cleanup(stop)
	return stop
}

// send sends nt from f and waits until it is on the Notifier's channel.
func send(t *testing.T, f *termsigtest.Fake, nt termsig.Notice) {
	t.Helper()
	select {
	case <-f.Send(nt):
	case <-time.After(10 * time.Second):
		t.Fatalf("the notice %v was not delivered", nt)
	}
}

// deletePods deletes the pods now, as the kubelet does once their
// containers have stopped.
func deletePods(t *testing.T, client kubernetes.Interface, names ...string) {
	t.Helper()
	for _, n := range names {
		ns, name, _ := strings.Cut(n, "/")
		require.NoError(t, client.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}))
	}
}

// TestHeldTerminationDrainsAndReleasesOnceThePodsAreGone: against a real
// API server, with kubedrain's RBAC, a held termination cordons the node
// and evicts its pods with grace periods computed from the hold's
// deadline (five minutes: more than a spot interruption would leave), and
// releases the hold once the evicted pods are gone, not before: the
// machine then goes at once, instead of at the hook's timeout.
func TestHeldTerminationDrainsAndReleasesOnceThePodsAreGone(t *testing.T) {
	cl, _ := setupCluster(t)
	for _, p := range []*corev1.Pod{
		newPod("work", "web", ownedBy("ReplicaSet"), grace(600)),
		newPod("work", "quick", grace(20)),
		newPod("kube-system", "agent", ownedBy("DaemonSet")),
		newPod("kube-system", "kubedrain-self"),
	} {
		createRunningPod(t, cl.Client, p)
	}
	client, err := kubernetes.NewForConfig(cl.ServiceAccountConfig(t, "kube-system", "kubedrain"))
	require.NoError(t, err)
	log, _ := watchedLogger(t)
	o := &options{node: testNode, margin: 10 * time.Second, fallback: 2 * time.Minute, maxHold: time.Hour,
		onRebalance: cordon, onMaintenance: cordon, self: types.NamespacedName{Namespace: "kube-system", Name: "kubedrain-self"}}
	c := newController(o, client, log)
	c.evictor.goneEvery = 50 * time.Millisecond
	asg := &recorder{Fake: termsigtest.NewFake("asg"), released: make(chan termsig.Notice, 1)}
	runController(t, c, asg)

	held := heldNotice(5*time.Minute, time.Hour)
	send(t, asg.Fake, held)
	untilNode(t, cl.Client, "cordoned for the held termination", func(n *corev1.Node) bool {
		return n.Spec.Unschedulable && hasTaint(n, "terminate")
	})
	pods := untilPods(t, cl.Client, "work", "evictions", terminating("work/web", "work/quick"))
	m := byName(pods)
	assert.Equal(t, int64(20), *m["work/quick"].DeletionGracePeriodSeconds)
	// 600 s capped by the hold's five minutes less the 10 s margin, less
	// the time the drain took to start; a spot interruption's two minutes
	// would have left 110 s at most.
	web := *m["work/web"].DeletionGracePeriodSeconds
	assert.LessOrEqual(t, web, int64(held.Deadline.Sub(held.Observed)/time.Second)-10)
	assert.Greater(t, web, int64(250))

	// The pods terminate within their grace periods: the hold stays.
	select {
	case nt := <-asg.released:
		t.Fatalf("released while the pods terminate: %v", nt)
	default:
	}
	deletePods(t, cl.Client, "work/web", "work/quick")
	select {
	case nt := <-asg.released:
		assert.Equal(t, held.Event, nt.Event)
		assert.True(t, nt.Held)
	case <-time.After(30 * time.Second):
		t.Fatal("the hold was not released once the pods were gone")
	}
	for _, n := range []string{"kube-system/agent", "kube-system/kubedrain-self"} {
		ns, name, _ := strings.Cut(n, "/")
		p, err := cl.Client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, p.DeletionTimestamp, "%s must stay", n)
	}
}

// TestHeldTerminationGraceComesFromTheHoldsEnd: the grace periods of a
// held termination end margin before the hold's end: its deadline as it
// stands, but not after its HoldLimit, nor --max-hold after its first
// notice.
func TestHeldTerminationGraceComesFromTheHoldsEnd(t *testing.T) {
	for _, tc := range []struct {
		name          string
		in, limit     time.Duration
		maxHold       time.Duration
		wantAtMostSec int64 // the hold's end from the notice, less the 10 s margin
	}{
		{"its deadline", 5 * time.Minute, time.Hour, time.Hour, 290},
		{"its hold limit", 30 * time.Minute, 4 * time.Minute, time.Hour, 230},
		{"--max-hold", 30 * time.Minute, 2 * time.Hour, 3 * time.Minute, 170},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, newNode(), newPod("ns", "slow", grace(3600)))
			c := newTestController(t, f, t0)
			c.now, c.evictor.now = time.Now, time.Now
			c.maxHold = tc.maxHold
			c.handle(t.Context(), heldNotice(tc.in, tc.limit))
			f.awaitAttempts(t, "ns/slow", 1)
			c.stopDrain()
			got := f.evicted()["ns/slow"]
			assert.LessOrEqual(t, got, tc.wantAtMostSec)
			assert.GreaterOrEqual(t, got, tc.wantAtMostSec-5)
		})
	}
}

// TestLaterHeldNoticeExtendsTheDrainWithoutStartingItAgain: the hold's
// source extends it with a later deadline while a budget refuses an
// eviction: the drain goes on (it is not started again, and the node is
// not written again), past the first notice's end, and the eviction the
// budget lets go later gets the grace period of the extended hold. The
// latest notice is released once the pod is gone.
func TestLaterHeldNoticeExtendsTheDrainWithoutStartingItAgain(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "guarded", grace(600)))
	f.setRefuse("ns/guarded", true)
	c := newTestController(t, f, t0)
	c.now, c.evictor.now = time.Now, time.Now
	c.evictor.goneEvery = 10 * time.Millisecond
	log, lw := watchedLogger(t)
	c.log, c.kube.log = log, log
	asg := &recorder{Fake: termsigtest.NewFake("asg"), released: make(chan termsig.Notice, 1)}
	runController(t, c, asg)

	first := heldNotice(30*time.Second, time.Hour) // the drain would end 20 s from now
	send(t, asg.Fake, first)
	f.awaitAttempts(t, "ns/guarded", 2)
	extended := first
	extended.Deadline, extended.Observed = time.Now().Add(10*time.Minute), time.Now()
	send(t, asg.Fake, extended)
	lw.await(t, "the hold was extended")

	f.setRefuse("ns/guarded", false) // the budget lets it go
	lw.await(t, "waiting for the evicted pods to be gone")
	got := f.evicted()["ns/guarded"]
	assert.Greater(t, got, int64(500), "the grace period is the extended hold's, not the first notice's 20 s")
	assert.Zero(t, lw.count("drain stopped"), "the drain was started again")
	assert.Equal(t, 1, countOf(f.events(t), "Drain/TerminationNotice"), "the extension wrote the node again")

	require.NoError(t, f.CoreV1().Pods("ns").Delete(t.Context(), "guarded", metav1.DeleteOptions{}))
	select {
	case nt := <-asg.released:
		assert.True(t, extended.Deadline.Equal(nt.Deadline), "the latest notice is released")
	case <-time.After(10 * time.Second):
		t.Fatal("the hold was not released once the pod was gone")
	}
}

// TestHardNoticeDuringHoldDrainsByItsDeadline: a spot interruption during
// a held termination's drain is handled as without the hold: the drain
// starts again with grace periods that end before the spot deadline. The
// hold is released once that drain is over and its pods are gone; a hold
// that lapsed (a notice of its event that is no longer held) is not, and
// its notice's deadline is the one that counts.
func TestHardNoticeDuringHoldDrainsByItsDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hard    func(held termsig.Notice) termsig.Notice
		release bool
	}{
		{"spot interruption", func(termsig.Notice) termsig.Notice {
			return notice(termsig.Terminate, "spot/instance-action", time.Now().Add(2*time.Minute), time.Now())
		}, true},
		{"hold lapsed", func(held termsig.Notice) termsig.Notice {
			held.Held, held.HoldLimit = false, time.Time{}
			held.Deadline, held.Observed = time.Now().Add(2*time.Minute), time.Now()
			return held
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, newNode(), newPod("ns", "guarded", grace(600)))
			f.setRefuse("ns/guarded", true)
			c := newTestController(t, f, t0)
			c.now, c.evictor.now = time.Now, time.Now
			c.evictor.goneEvery = 10 * time.Millisecond
			log, lw := watchedLogger(t)
			c.log, c.kube.log = log, log
			asg := &recorder{Fake: termsigtest.NewFake("asg"), released: make(chan termsig.Notice, 1)}
			imds := termsigtest.NewFake("imds")
			stop := runController(t, c, asg, imds)

			held := heldNotice(time.Hour, 2*time.Hour)
			send(t, asg.Fake, held)
			f.awaitAttempts(t, "ns/guarded", 2)
			hard := tc.hard(held)
			from := imds
			if hard.Source == "asg" {
				from = asg.Fake
			}
			hard.Source = ""
			send(t, from, hard)
			lw.await(t, "drain stopped")

			f.setRefuse("ns/guarded", false)
			lw.await(t, "kubedrain: evicted")
			got := f.evicted()["ns/guarded"]
			assert.LessOrEqual(t, got, int64(110), "the grace period outlives the hard deadline")
			require.NoError(t, f.CoreV1().Pods("ns").Delete(t.Context(), "guarded", metav1.DeleteOptions{}))
			if !tc.release {
				lw.await(t, "drain done")
				stop() // and with it any release that was to come
				assert.Empty(t, asg.Released(), "a lapsed hold is not released")
				return
			}
			select {
			case nt := <-asg.released:
				assert.True(t, nt.Held)
			case <-time.After(10 * time.Second):
				t.Fatal("the hold was not released after the drain")
			}
		})
	}
}

// countOf returns how many of ss are s.
func countOf(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

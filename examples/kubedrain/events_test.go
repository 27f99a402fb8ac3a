package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/termsig/termsig"
)

// TestRetriedWriteRecordsItsEvent: a cordon written by a retry records its
// Event.
func TestRetriedWriteRecordsItsEvent(t *testing.T) {
	f := newFakeCluster(t, newNode())
	var mu sync.Mutex
	failures := 1
	f.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failures == 0 {
			return false, nil, nil
		}
		failures--
		return true, nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	})
	c := newTestController(t, f, t0)
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	require.False(t, f.node(t).Spec.Unschedulable)
	// What run does when retryC fires.
	ctx, cancel := context.WithCancel(t.Context())
	notices := make(chan termsig.Notice)
	done := make(chan struct{})
	go func() { defer close(done); c.run(ctx, notices, nil) }()
	untilFake(t, f, func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	cancel()
	<-done
	require.True(t, f.node(t).Spec.Unschedulable)
	assert.Contains(t, f.events(t), "Cordon/TerminationNotice", "the notice's Event was lost with its first write")
}

// TestCancelledDrainIsNotReportedDrained: a drain stopped because its
// advice was withdrawn records no "Drained" Event.
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

// TestHangingEventDoesNotDelayEvictions: an events API that hangs holds
// up neither the evictions nor, beyond eventTimeout, the next notice.
func TestHangingEventDoesNotDelayEvictions(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "p"))
	c := newTestController(t, f, t0)
	c.kube.client = hangingEvents{ctxClient{f}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(2*time.Minute), time.Now()))
	}()
	ok := awaitAttemptsWithin(f, "ns/p", 1, eventTimeout/2)
	select {
	case <-done:
	case <-time.After(2 * eventTimeout):
		t.Fatal("handle held up by a hanging Event past eventTimeout")
	}
	if c.drain != nil {
		awaitDrain(t, c)
		c.stopDrain()
	}
	assert.True(t, ok, "no eviction while the Event hangs")
}

// hangingEvents makes Event creation hang until its context is done, as
// an API server that does not answer does.
type hangingEvents struct{ ctxClient }

func (c hangingEvents) EventsV1() typedeventsv1.EventsV1Interface {
	return hangingEventsV1{c.ctxClient.EventsV1()}
}

type hangingEventsV1 struct {
	typedeventsv1.EventsV1Interface
}

func (e hangingEventsV1) Events(ns string) typedeventsv1.EventInterface {
	return hangingEventList{e.EventsV1Interface.Events(ns)}
}

type hangingEventList struct{ typedeventsv1.EventInterface }

func (hangingEventList) Create(ctx context.Context, _ *eventsv1.Event, _ metav1.CreateOptions) (*eventsv1.Event, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/termsig/termsig"
)

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

// TestFailedWriteNotReportedAsDone: a node write that fails (a webhook
// down) is neither logged as done nor recorded as an Event: the Cleared's
// uncordon did not happen, the node is still cordoned. (Found by review.)
func TestFailedWriteNotReportedAsDone(t *testing.T) {
	f := newFakeCluster(t, newNode())
	c := newTestController(t, f, t0)
	var logs syncBuffer
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	require.True(t, f.node(t).Spec.Unschedulable)

	f.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New(`failed calling webhook "nodes.example.com": connection refused`))
	})
	c.handle(t.Context(), notice(termsig.Cleared, "rebalance", time.Time{}, t0))
	require.True(t, f.node(t).Spec.Unschedulable, "the patch failed: the node is still cordoned")
	assert.NotContains(t, f.events(t), "Uncordon/TerminationNoticeCleared", "an Event says the node was uncordoned")
	assert.NotContains(t, logs.String(), "uncordoned the node", "the log says the node was uncordoned")
}

// TestFailedCordonNotLoggedAsUpdated: the same for a cordon.
func TestFailedCordonNotLoggedAsUpdated(t *testing.T) {
	f := newFakeCluster(t, newNode())
	failNodePatches(f)
	c := newTestController(t, f, t0)
	var logs syncBuffer
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	require.False(t, f.node(t).Spec.Unschedulable)
	assert.NotContains(t, logs.String(), "node updated", "the log says the node was updated")
}

// TestLastingWriteFailureLogsOnce: a node write that keeps failing the
// same way (a webhook down for minutes) is logged once, not at every
// retry: in production that is a WARN and a false "node updated" INFO
// every 2.5–5 s per node. (Found by review.)
func TestLastingWriteFailureLogsOnce(t *testing.T) {
	f := newFakeCluster(t, newNode())
	failNodePatches(f)
	c := newTestController(t, f, t0)
	var logs syncBuffer
	c.log = slog.New(slog.NewJSONHandler(&logs, nil))
	c.handle(t.Context(), notice(termsig.Rebalance, "rebalance", time.Time{}, t0))
	for range 200 { // what run does at each retryC
		<-c.retryC
		c.flush(t.Context())
	}
	c.timer.Stop()
	lines := strings.Count(logs.String(), "\n")
	assert.LessOrEqual(t, lines, 4, "%d lines for one lasting failure; the first ones:\n%.1200s", lines, logs.String())
}

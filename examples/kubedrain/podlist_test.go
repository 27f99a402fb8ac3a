package main

import (
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds/imdstest"
)

// failPodLists makes the first n pod LISTs answer err (n < 0: all of
// them), and returns the count of LISTs.
func failPodLists(f *fakeCluster, n int, err error) *atomic.Int64 {
	var lists atomic.Int64
	f.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if i := lists.Add(1); n < 0 || i <= int64(n) {
			return true, nil, err
		}
		return false, nil, nil
	})
	return &lists
}

// logTo makes c log, at debug level, to a buffer it returns.
func logTo(c *controller) *syncBuffer {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c.log, c.kube.log = log, log
	return &buf
}

// TestDrainEvictsOnceThePodListRecovers: a LIST of the node's pods that
// fails (an etcd timeout's 500; 429s from an API server under load that
// outlast client-go's own retries, which it makes only when the answer
// has a Retry-After, 10 at most) is tried again with the evictions'
// backoff, and the pods are evicted once it answers.
func TestDrainEvictsOnceThePodListRecovers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		err      error
	}{
		{"one 500", 1, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))},
		{"429s past client-go's retries", 12, apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, newNode(), newPod("ns", "a"), newPod("ns", "b", grace(5)))
			lists := failPodLists(f, tc.failures, tc.err)
			c := newTestController(t, f, t0)
			c.now, c.evictor.now = time.Now, time.Now
			buf := logTo(c)
			start := time.Now()
			c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", start.Add(2*time.Minute), start))
			awaitDrain(t, c)
			took := time.Since(start)
			c.stopDrain()
			assert.Equal(t, map[string]int64{"ns/a": 30, "ns/b": 5}, f.evicted(), "the pods were not evicted after the LIST recovered")
			assert.EqualValues(t, tc.failures+1, lists.Load(), "LISTs")
			assert.Contains(t, buf.String(), "kubedrain: drain done")
			assert.Regexp(t, `msg="kubedrain: listed the node's pods" .*after-failures=`+strconv.Itoa(tc.failures)+"\n", buf.String())
			t.Logf("%d LISTs, %d evictions, %v", lists.Load(), len(f.evicted()), took)
		})
	}
}

// TestDrainWhosePodListNeverRecoversEndsAtItsEnd: a LIST that fails for
// good is tried until margin before the deadline, and not after; the
// drain then ends with a log line and an Event that say why.
func TestDrainWhosePodListNeverRecoversEndsAtItsEnd(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "a"))
	lists := failPodLists(f, -1, apierrors.NewInternalError(errors.New("etcdserver: request timed out")))
	c := newTestController(t, f, t0)
	c.now, c.evictor.now = time.Now, time.Now
	buf := logTo(c)
	now := time.Now()
	deadline := now.Add(c.evictor.margin + 500*time.Millisecond)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", deadline, now))
	awaitDrain(t, c)
	ended := time.Now()
	n := lists.Load() // the drain is over: no LIST after it
	c.stopDrain()

	end := deadline.Add(-c.evictor.margin)
	assert.False(t, ended.Before(end), "the drain gave up %v before deadline − margin", end.Sub(ended))
	assert.Less(t, ended.Sub(end), time.Second, "the drain went on past deadline − margin")
	assert.Greater(t, n, int64(2), "the LIST was not tried again")
	assert.Empty(t, f.evicted())
	var line string
	for l := range strings.Lines(buf.String()) {
		if strings.Contains(l, "kubedrain: drain failed") {
			line = l
		}
	}
	require.NotEmpty(t, line, "no log line says the drain failed:\n%s", buf.String())
	assert.Contains(t, line, "could not list the pods of node node-1 before the drain's end")
	assert.Contains(t, line, "etcdserver: request timed out")
	assert.Contains(t, f.events(t), "Drain/DrainFailed")
	assert.Equal(t, n, lists.Load(), "a LIST after the drain ended")
	t.Logf("%d LISTs, ended %v after deadline − margin; %s", n, ended.Sub(end), strings.TrimSpace(line))
}

// TestDrainWithAForbiddenPodListFailsAtOnce: an error that will not pass
// (the RBAC of deploy/ missing) is not retried for the whole drain.
func TestDrainWithAForbiddenPodListFailsAtOnce(t *testing.T) {
	f := newFakeCluster(t, newNode(), newPod("ns", "a"))
	lists := failPodLists(f, -1, apierrors.NewForbidden(
		schema.GroupResource{Resource: "pods"}, "", errors.New(`User "system:serviceaccount:kube-system:kubedrain" cannot list resource "pods"`)))
	c := newTestController(t, f, t0)
	c.now, c.evictor.now = time.Now, time.Now
	buf := logTo(c)
	c.handle(t.Context(), notice(termsig.Terminate, "spot/instance-action", time.Now().Add(2*time.Minute), time.Now()))
	awaitDrain(t, c)
	c.stopDrain()
	assert.EqualValues(t, 1, lists.Load(), "LISTs")
	assert.Contains(t, buf.String(), "kubedrain: drain failed")
	assert.Contains(t, buf.String(), "cannot list resource")
}

// TestDrainAgainstAPIServerListsPodsAgainAfterA500: kubedrain, through a
// proxy in front of a real kube-apiserver that answers the first LIST of
// the node's pods with a plain 500 (no Retry-After, so client-go does
// not retry it), evicts the pods once the next LIST answers.
func TestDrainAgainstAPIServerListsPodsAgainAfterA500(t *testing.T) {
	c, _ := setupCluster(t)
	cfg := c.ServiceAccountConfig(t, "kube-system", "kubedrain")
	up, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	tlsCfg, err := rest.TLSConfigFor(cfg)
	require.NoError(t, err)
	tr := &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(up) },
		Transport:     tr,
		FlushInterval: -1, // watches stream
	}
	var lists atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods" && q.Has("fieldSelector") && q.Get("watch") == "" {
			if lists.Add(1) == 1 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcdserver: request timed out","reason":"InternalError","code":500}`)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	pc := rest.CopyConfig(cfg)
	pc.Host = srv.URL
	pc.TLSClientConfig = rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}

	createRunningPod(t, c.Client, newPod("work", "a"))
	createRunningPod(t, c.Client, newPod("work", "b"))
	imds := imdstest.NewServer()
	defer imds.Close()
	kd := startKubedrain(t, c.Kubeconfig(t, pc), imds.URL, "--imds-interval", "20ms")
	start := time.Now()
	imds.SetInterruption("terminate", start.Add(2*time.Minute))
	kd.await(t, "kubedrain: listing the node's pods failed, trying again")
	untilPods(t, c.Client, "work", "the pods evicted", terminating("work/a", "work/b"))
	kd.await(t, "kubedrain: drain done")
	assert.EqualValues(t, 2, lists.Load(), "LISTs of the node's pods")
	t.Logf("%d LISTs (the first answered 500), pods evicted %v after the notice", lists.Load(), time.Since(start))
}

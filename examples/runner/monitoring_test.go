//go:build linux

package main

// Tests of what the runner tells a monitoring system (its metrics,
// probes and webhook), with its loop in this process on a fakeService
// and termsigtest.Fake sources, and the ops server started by the test,
// so that it can be read after the runner has returned.
// monitoring_binary_test.go runs the binary.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/termsigtest"
)

// opsClient keeps no idle connection, whose goroutines goleak would see.
var opsClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: holdTestWait}

// startOpsForTest starts an ops server as the runner's flags would, on
// one loopback listener, closed when the test ends.
func startOpsForTest(t testing.TB, cfg ops.Config) *ops.Server {
	t.Helper()
	cfg.MetricsAddr, cfg.ProbeAddr = "127.0.0.1:0", "127.0.0.1:0"
	srv, err := startOps(cfg, "held-runner", nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

// statusOf returns the status of GET http://addr/path, and its body.
func statusOf(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := opsClient.Get("http://" + addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// countersOf scrapes /metrics at addr and returns the counters of family
// name by the value of their one label.
func countersOf(t *testing.T, addr, name string) map[string]float64 {
	t.Helper()
	resp, err := opsClient.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return oneLabel(mfs[name])
}

func oneLabel(mf *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		if l := m.GetLabel(); len(l) == 1 {
			out[l[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// A hook is a webhook endpoint on loopback: each POST's text is on texts
// as it arrives, and answer gives its status (and may block).
type hook struct {
	url    string
	texts  chan string
	inside atomic.Int32 // POSTs not answered yet
}

func newHook(t testing.TB, answer func(r *http.Request) int) *hook {
	t.Helper()
	h := &hook{texts: make(chan string, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.inside.Add(1)
		defer h.inside.Add(-1)
		var body struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		h.texts <- body.Text
		w.WriteHeader(answer(r))
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

func (h *hook) next(t testing.TB) string {
	t.Helper()
	select {
	case s := <-h.texts:
		return s
	case <-time.After(holdTestWait):
		t.Fatal("the webhook got no more POSTs")
		return ""
	}
}

// A spot interruption mid-job, with a webhook that hangs or answers 500:
// the job is re-queued and the runner unregistered while the webhook
// still holds (or fails) the notice's POST. Each event is given up at the
// notice's deadline and counted failed; nothing crashes.
func TestWebhookThatHangsOrFailsDoesNotDelayTheHandBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(r *http.Request) int
	}{
		{"hangs", func(r *http.Request) int { <-r.Context().Done(); return http.StatusOK }},
		{"answers 500", func(*http.Request) int { return http.StatusInternalServerError }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHook(t, tc.answer)
			srv := startOpsForTest(t, ops.Config{Webhook: ops.WebhookConfig{URL: h.url}})
			path, _ := gate(t) // never opened: the job runs until stopped
			svc := &fakeService{onClaim: func() *Job { return &Job{ID: "j-1", Command: "read line < " + path} }}
			spot := termsigtest.NewFake("imds")
			run := runHeldWith(t, svc, config{grace: time.Second, margin: time.Second, maxHold: time.Hour}, srv, spot)
			run.out.wait(t, `job j-1 started`)

			deadline := time.Now().Add(4 * time.Second)
			sent(t, spot.Send(termsig.Notice{Kind: termsig.Terminate, Event: "spot/instance-action", Deadline: deadline}))
			h.next(t) // the notice's first POST
			assert.Equal(t, exitClean, run.exit(t))
			assert.True(t, time.Now().Before(deadline), "handed back before the notice's deadline, when the webhook gives up")
			if tc.name == "hangs" {
				assert.EqualValues(t, 1, h.inside.Load(), "the notice's POST still hangs: the hand-back did not wait for it")
			}
			assert.Equal(t, []string{"requeue j-1", "remove r-1", "release imds spot/instance-action"}, svc.calls())

			addr := srv.MetricsAddr()
			require.Eventually(t, func() bool { return countersOf(t, addr, "termsig_webhook_sends_total")["failed"] == 3 },
				holdTestWait, 10*time.Millisecond, "the notice and both outcomes given up at the deadline")
			assert.Equal(t, map[string]float64{"sent": 0, "failed": 3, "dropped": 0}, countersOf(t, addr, "termsig_webhook_sends_total"))
			assert.Equal(t, map[string]float64{"ok": 1, "gone": 0, "failed": 0}, countersOf(t, addr, "runner_job_requeues_total"))
			assert.Equal(t, map[string]float64{"ok": 1, "failed": 0}, countersOf(t, addr, "runner_unregistrations_total"))
		})
	}
}

// A held termination that lets the job finish is posted once, then what
// came of it: the job finished (reported, not re-queued), the runner
// unregistered; the counters agree.
func TestHeldTerminationPostsTheJobFinishedThenUnregistered(t *testing.T) {
	h := newHook(t, func(*http.Request) int { return http.StatusOK })
	srv := startOpsForTest(t, ops.Config{Webhook: ops.WebhookConfig{URL: h.url}})
	path, finish := gate(t)
	svc := &fakeService{onClaim: func() *Job { return &Job{ID: "j-1", Command: "read line < " + path} }}
	asg := termsigtest.NewFake("asg")
	run := runHeldWith(t, svc, config{grace: time.Second, margin: time.Second, maxHold: time.Hour}, srv, asg)
	run.out.wait(t, `job j-1 started`)

	first := heldNotice(time.Now().Add(time.Hour))
	sent(t, asg.Send(first))
	run.out.wait(t, `held: stopped claiming jobs`)
	moved := first
	moved.Deadline = moved.Deadline.Add(time.Hour)
	sent(t, asg.Send(moved)) // the same hold: not posted again
	run.out.wait(t, `the hold moved`)
	finish()
	assert.Equal(t, exitClean, run.exit(t))
	srv.Close() // posts what is queued

	close(h.texts)
	var texts []string
	for s := range h.texts {
		texts = append(texts, s)
	}
	require.Len(t, texts, 3, "%q", texts)
	assert.True(t, strings.HasPrefix(texts[0], "runner: asg: terminate (auto scaling: scale-in, held)"), texts[0])
	assert.True(t, strings.HasSuffix(texts[0], " (runner=held-runner)"), texts[0])
	assert.True(t, strings.HasPrefix(texts[1], "runner: job finished: asg: terminate"), texts[1])
	assert.True(t, strings.HasSuffix(texts[1], " (job=j-1, runner=held-runner, status=exit status 0)"), texts[1])
	assert.True(t, strings.HasPrefix(texts[2], "runner: unregistered: asg: terminate"), texts[2])
	assert.True(t, strings.HasSuffix(texts[2], " (runner=held-runner, runner_id=r-1)"), texts[2])
}

// /healthz follows the runner's loop: with a job running and nothing
// else happening it stays healthy, the loop turning on the heartbeat;
// once the runner has returned, nothing turns it and it fails. /readyz
// says whether the runner is registered.
func TestProbesFollowTheLoopAndTheRegistration(t *testing.T) {
	clk := &testClock{t: time.Now()}
	srv := startOpsForTest(t, ops.Config{Staleness: 300 * time.Millisecond, Now: clk.Now})
	path, _ := gate(t)
	svc := &fakeService{onClaim: func() *Job { return &Job{ID: "j-1", Command: "read line < " + path} }}
	spot := termsigtest.NewFake("imds")
	run := runHeldWith(t, svc, config{grace: time.Second, margin: time.Second, maxHold: time.Hour}, srv, spot)
	run.out.wait(t, `job j-1 started`)
	addr := srv.ProbeAddr()
	code, body := statusOf(t, addr, "/readyz")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "[+]notifier ok\n[+]registration ok\n")

	// Past the staleness each time: healthy again only once the loop
	// turns. A turn for the job's start may still be under way at the
	// first; the others can only be the heartbeat's.
	for range 3 {
		clk.Add(time.Second)
		require.Eventually(t, func() bool { code, _ := statusOf(t, addr, "/healthz"); return code == http.StatusOK },
			holdTestWait, 10*time.Millisecond, "an idle loop turns on the heartbeat")
	}

	sent(t, spot.Send(termsig.Notice{Kind: termsig.Terminate, Event: "spot/instance-action", Deadline: time.Now().Add(time.Minute)}))
	assert.Equal(t, exitClean, run.exit(t))
	code, body = statusOf(t, addr, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code, "unregistered")
	assert.Contains(t, body, "[-]registration failed: not registered with the CI service")
	clk.Add(time.Second)
	code, _ = statusOf(t, addr, "/healthz")
	assert.Equal(t, http.StatusInternalServerError, code, "the loop has stopped")
}

// A testClock is a time the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

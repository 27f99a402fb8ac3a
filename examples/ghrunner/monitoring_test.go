//go:build unix

package main

// Tests of what ghrunner tells a monitoring system: its metrics, probes
// and webhook (--metrics-bind-address, --health-probe-bind-address,
// --webhook-url), read over HTTP as Prometheus, a kubelet and a chat
// webhook would.

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
	"github.com/termsig/termsig/examples/ghrunner/internal/supervisor"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/internal/ops/opstest"
	"github.com/termsig/termsig/termsigtest"
)

// httpClient keeps no idle connection, whose goroutines goleak would see.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: wait}

// get fetches http://addr/path and returns its status and body.
func get(t testing.TB, addr, path string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get("http://" + addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// counters returns the values of the counters of family name by their
// label key's value: the series of a metric with one label.
func counters(mfs map[string]*dto.MetricFamily, name, key string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mfs[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == key {
				out[lp.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// total is the value of the counter of family name without labels.
func total(t testing.TB, mfs map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	v, ok := opstest.Value(mfs, name, map[string]string{})
	require.True(t, ok, "no %s", name)
	return v
}

// A receiver is a webhook endpoint on loopback. Each POST's text (the
// default template's {"text": ...}) is on texts as it arrives; answer
// gives its status, given its number (from 1), and may block.
type receiver struct {
	url    string
	texts  chan string
	mu     sync.Mutex
	n      int
	inside atomic.Int32 // POSTs not answered yet
}

func newReceiver(t testing.TB, answer func(n int, r *http.Request) int) *receiver {
	t.Helper()
	rc := &receiver{texts: make(chan string, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.inside.Add(1)
		defer rc.inside.Add(-1)
		var body struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		rc.mu.Lock()
		rc.n++
		n := rc.n
		rc.mu.Unlock()
		rc.texts <- body.Text
		w.WriteHeader(answer(n, r))
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL
	return rc
}

// next returns the text of the next POST.
func (rc *receiver) next(t testing.TB) string {
	t.Helper()
	select {
	case s := <-rc.texts:
		return s
	case <-time.After(wait):
		t.Fatal("the webhook got no more POSTs")
		return ""
	}
}

// opsFlags serve metrics and probes on one loopback listener, and post
// to url.
func opsFlags(url string) []string {
	return []string{"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0", "--webhook-url", url}
}

// A spot interruption mid-job, as a monitoring system sees it: before it,
// the job counted, /healthz and /readyz 200 and every series at 0; then
// the notice and each outcome posted to the webhook, and once the
// cleanup is done the counters of what it did, /readyz failing on the
// registration it removed. The webhook holds its third POST, the last
// outcome, so that the metrics can be read before ghrunner exits (it
// waits for what its webhook has queued).
func TestSpotNoticeMidJobIsCountedProbedAndPosted(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(n int, r *http.Request) int {
		if n == 3 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return http.StatusOK
	})
	w := newWorld(t, 0)
	p, r, run := w.startWithJob(opsFlags(rc.url)...)
	addr, _ := p.logLine("ghrunner: serving metrics and health probes")["addr"].(string)
	require.NotEmpty(t, addr)

	code, body := get(t, addr, "/healthz")
	assert.Equal(t, http.StatusOK, code, body)
	code, body = get(t, addr, "/readyz")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "[+]notifier ok\n[+]registration ok\n")
	before := opstest.Scrape(t, addr)
	assert.Equal(t, 1.0, total(t, before, "ghrunner_jobs_started_total"))
	assert.Equal(t, map[string]float64{"ok": 0, "failed": 0, "max_attempts": 0}, counters(before, "ghrunner_reruns_total", "result"))
	assert.Equal(t, map[string]float64{"ok": 0, "failed": 0, "kept": 0}, counters(before, "ghrunner_unregistrations_total", "result"))
	assert.Equal(t, map[string]float64{"ok": 0, "failed": 0}, counters(before, "ghrunner_releases_total", "result"))
	assert.Len(t, counters(before, "ghrunner_jobs_completed_total", "result"), 6, "every result at 0")

	w.md.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	texts := []string{rc.next(t), rc.next(t), rc.next(t)} // the third is held
	p.logLine("cleanup done")

	mfs := opstest.Scrape(t, addr)
	notices, _ := opstest.Value(mfs, "termsig_notices_total", map[string]string{"source": "imds", "kind": "terminate", "event": "spot/instance-action"})
	assert.Equal(t, 1.0, notices)
	assert.EqualValues(t, 1, mfs["termsig_notice_action_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(), "the cleanup acted on the notice")
	assert.Equal(t, map[string]float64{"ok": 1, "failed": 0, "max_attempts": 0}, counters(mfs, "ghrunner_reruns_total", "result"))
	assert.Equal(t, map[string]float64{"ok": 1, "failed": 0, "kept": 0}, counters(mfs, "ghrunner_unregistrations_total", "result"))
	assert.Equal(t, map[string]float64{"ok": 1, "failed": 0}, counters(mfs, "ghrunner_releases_total", "result"))
	canceled, _ := opstest.Value(mfs, "ghrunner_jobs_completed_total", map[string]string{"result": "canceled"})
	assert.Equal(t, 1.0, canceled, "the listener said the job it was stopped in was canceled")
	sent, _ := opstest.Value(mfs, "termsig_webhook_sends_total", map[string]string{"result": "sent"})
	assert.Equal(t, 2.0, sent, "the notice and the first outcome; the third is held")
	code, body = get(t, addr, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "[-]registration failed: the runner is not registered with GitHub")
	code, _ = get(t, addr, "/healthz")
	assert.Equal(t, http.StatusOK, code, "the loop turned lately: not stale while ghrunner posts its last events")

	close(release)
	require.Equal(t, supervisor.ExitOK, p.exit())
	fields := " (repo=acme/app, runner=spot-1)"
	assert.True(t, strings.HasPrefix(texts[0], "ghrunner: imds: terminate (spot interruption: terminate)"), texts[0])
	assert.True(t, strings.HasSuffix(texts[0], fields), texts[0])
	outcomes := texts[1:]
	rerun := "ghrunner: re-run requested: imds: terminate"
	unregistered := "ghrunner: unregistered: imds: terminate"
	if strings.HasPrefix(outcomes[0], unregistered) { // the two are done side by side
		outcomes[0], outcomes[1] = outcomes[1], outcomes[0]
	}
	assert.True(t, strings.HasPrefix(outcomes[0], rerun), outcomes[0])
	assert.True(t, strings.HasSuffix(outcomes[0], " (attempt=2, job=build, repo=acme/app, run="+itoa(run)+", runner=spot-1)"), outcomes[0])
	assert.True(t, strings.HasPrefix(outcomes[1], unregistered), outcomes[1])
	assert.True(t, strings.HasSuffix(outcomes[1], " (repo=acme/app, runner=spot-1, runner_id="+itoa(r.ID)+")"), outcomes[1])
	for _, s := range texts {
		assert.NotContains(t, s, testToken, "no token in what the webhook gets")
	}
}

// A webhook that hangs, or answers 500, delays nothing: the cleanup is
// done, and the supervisor returns, while the webhook still holds (or
// fails) the notice's POST. Each event is then given up at the notice's
// deadline and counted failed; nothing crashes.
func TestWebhookThatHangsOrFailsDoesNotDelayTheCleanup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(n int, r *http.Request) int
	}{
		{"hangs", func(_ int, r *http.Request) int { <-r.Context().Done(); return http.StatusOK }},
		{"answers 500", func(int, *http.Request) int { return http.StatusInternalServerError }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver(t, tc.answer)
			w := newWorld(t, 0)
			spot := termsigtest.NewFake("imds")
			p, r, run := w.runningHere([]termsig.Source{spot}, ghfake.JobSpec{Name: "build"}, opsFlags(rc.url)...)
			deadline := time.Now().Add(4 * time.Second)
			send(t, spot, termsig.Notice{Kind: termsig.Terminate, Event: "spot/instance-action", Reason: "spot interruption: terminate", Deadline: deadline})
			rc.next(t) // the notice's first POST
			w.checkCleanedUp(p, r, run)
			assert.True(t, time.Now().Before(deadline), "the cleanup is done before the notice's deadline, when the webhook gives up")
			if tc.name == "hangs" {
				assert.EqualValues(t, 1, rc.inside.Load(), "the notice's POST still hangs: the cleanup did not wait for it")
			}
			addr := p.srv.MetricsAddr()
			require.Eventually(t, func() bool {
				v, _ := opstest.Value(opstest.Scrape(t, addr), "termsig_webhook_sends_total", map[string]string{"result": "failed"})
				return v == 3
			}, wait, 10*time.Millisecond, "the notice and both outcomes given up at the deadline")
			mfs := opstest.Scrape(t, addr)
			assert.Equal(t, map[string]float64{"sent": 0, "failed": 3, "dropped": 0}, counters(mfs, "termsig_webhook_sends_total", "result"))
			assert.Equal(t, map[string]float64{"ok": 1, "failed": 0, "max_attempts": 0}, counters(mfs, "ghrunner_reruns_total", "result"))
			assert.Equal(t, map[string]float64{"ok": 1, "failed": 0, "kept": 0}, counters(mfs, "ghrunner_unregistrations_total", "result"))
		})
	}
}

// A held termination that lets the job finish is posted once, then what
// came of it: the job finished (not re-run), the registration removed;
// the counters agree.
func TestHeldTerminationPostsTheJobFinishedThenUnregistered(t *testing.T) {
	rc := newReceiver(t, func(int, *http.Request) int { return http.StatusOK })
	w := newWorld(t, 0)
	asg := newReleaser("asg")
	p, r, run := w.runningHere([]termsig.Source{asg}, ghfake.JobSpec{Name: "build"}, opsFlags(rc.url)...)
	held := heldNotice(10 * time.Minute)
	send(t, asg.Fake, held)
	p.logLine("letting the job finish")
	moved := held
	moved.Deadline = moved.Deadline.Add(time.Minute)
	send(t, asg.Fake, moved) // the same hold: not posted again
	p.logLine("the hold moved")
	require.True(t, w.gh.FinishJob(run))
	require.Equal(t, supervisor.ExitOK, p.exit())

	mfs := opstest.Scrape(t, p.srv.MetricsAddr())
	succeeded, _ := opstest.Value(mfs, "ghrunner_jobs_completed_total", map[string]string{"result": "succeeded"})
	assert.Equal(t, 1.0, succeeded)
	assert.Equal(t, map[string]float64{"ok": 0, "failed": 0, "max_attempts": 0}, counters(mfs, "ghrunner_reruns_total", "result"))
	assert.Equal(t, map[string]float64{"ok": 1, "failed": 0, "kept": 0}, counters(mfs, "ghrunner_unregistrations_total", "result"))
	assert.Equal(t, map[string]float64{"ok": 1, "failed": 0}, counters(mfs, "ghrunner_releases_total", "result"))
	p.srv.Close() // posts what is queued
	close(rc.texts)
	var texts []string
	for s := range rc.texts {
		texts = append(texts, s)
	}
	require.Len(t, texts, 3, "%q", texts)
	assert.True(t, strings.HasPrefix(texts[0], "ghrunner: asg: terminate (scale-in: termination hook)"), texts[0])
	assert.True(t, strings.HasPrefix(texts[1], "ghrunner: job finished: asg: terminate"), texts[1])
	assert.True(t, strings.HasSuffix(texts[1], " (job=build, repo=acme/app, result=Succeeded, runner=spot-1)"), texts[1])
	assert.True(t, strings.HasPrefix(texts[2], "ghrunner: unregistered: asg: terminate"), texts[2])
	assert.True(t, strings.HasSuffix(texts[2], " (repo=acme/app, runner=spot-1, runner_id="+itoa(r.ID)+")"), texts[2])
}

// /healthz follows ghrunner's loop: with a job running and nothing else
// happening it stays healthy, the loop turning on the ops heartbeat;
// once the supervisor has returned, nothing turns it and it fails.
func TestHealthzFollowsTheLoop(t *testing.T) {
	clk := &testClock{t: time.Now()}
	w := newWorld(t, 0)
	w.opsConfig = func(c *ops.Config) { c.Staleness, c.Now = 300*time.Millisecond, clk.Now }
	spot := termsigtest.NewFake("imds")
	p, r, run := w.runningHere([]termsig.Source{spot}, ghfake.JobSpec{Name: "build"}, "--health-probe-bind-address", "127.0.0.1:0")
	addr := p.srv.ProbeAddr()

	p.logLine("the runner runs") // the loop has handled the job's start
	// Past the staleness each time: healthy again only once the loop
	// turns. A turn for the job's start may still be under way at the
	// first; the others can only be the heartbeat's.
	for range 3 {
		clk.Add(time.Second)
		require.Eventually(t, func() bool { code, _ := get(t, addr, "/healthz"); return code == http.StatusOK },
			wait, 10*time.Millisecond, "an idle loop turns on the heartbeat")
	}

	send(t, spot, termsig.Notice{Kind: termsig.Terminate, Event: "spot/instance-action", Deadline: time.Now().Add(time.Minute)})
	w.checkCleanedUp(p, r, run)
	clk.Add(time.Second)
	code, body := get(t, addr, "/healthz")
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body, "[-]loop failed: the main loop has not turned since")
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

// A bad ops flag is a usage error that names the flag: exit 2, before
// anything is registered.
func TestBadOpsFlagIsAUsageError(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--webhook-url", "ftp://example.com/hook"}, "--webhook-url"},
		{[]string{"--webhook-header", "no colon"}, "webhook-header"},
		{[]string{"--metrics-bind-address", busy.Addr().String()}, "--metrics-bind-address " + busy.Addr().String()},
	} {
		w := newWorld(t, 0)
		p := w.start(tc.args...)
		assert.Equal(t, exitUsage, p.exit(), "%q", tc.args)
		assert.Contains(t, p.stderr.String(), tc.says, "%q", tc.args)
		assert.Empty(t, w.gh.Runners(), "nothing registered")
	}
}

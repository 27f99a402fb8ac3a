//go:build linux

package main_test

// Tests of the runner binary's metrics, probes and webhook
// (--metrics-bind-address, --health-probe-bind-address, --webhook-url),
// read over HTTP as Prometheus, a kubelet and a chat webhook would.

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
	"github.com/termsig/termsig/internal/ops/opstest"
)

// httpClient keeps no idle connection, whose goroutines goleak would see.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: wait}

func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get("http://" + addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// series returns the counters of family name by their labels, each as
// "k=v,k=v" in the order exposed (client_golang sorts them by name).
func series(mfs map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mfs[name].GetMetric() {
		var kv []string
		for _, lp := range m.GetLabel() {
			kv = append(kv, lp.GetName()+"="+lp.GetValue())
		}
		out[strings.Join(kv, ",")] = m.GetCounter().GetValue()
	}
	return out
}

var addrAttr = regexp.MustCompile(`addr=(\S+)`)

// A spot interruption mid-job, as a monitoring system sees it: before it,
// the job counted, /healthz and /readyz 200 and every series at 0; then
// the notice and each outcome posted to the webhook, and once the runner
// has handed the job back, the counters of what it did, /readyz failing
// on the registration it removed. The webhook holds its third POST, the
// last outcome, so that the metrics can be read before the runner exits
// (it waits for what its webhook has queued).
func TestSpotNoticeMidJobIsCountedProbedAndPosted(t *testing.T) {
	texts := make(chan string, 16)
	release := make(chan struct{})
	var posts atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		texts <- body.Text
		if posts.Add(1) == 3 { // the sender posts one at a time, in order
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer hook.Close()
	next := func() string {
		t.Helper()
		select {
		case s := <-texts:
			return s
		case <-time.After(wait):
			t.Fatal("the webhook got no more POSTs")
			return ""
		}
	}

	e := newEnv(t)
	job := e.enqueue("sleep 30")
	r := e.runner(nil, "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0", "--webhook-url", hook.URL)
	m := addrAttr.FindStringSubmatch(r.waitLine(`runner: serving metrics and health probes`, 1))
	require.NotNil(t, m)
	addr := m[1]
	r.waitLine(`job j-1 started`, 1)

	code, body := get(t, addr, "/healthz")
	assert.Equal(t, http.StatusOK, code, body)
	code, body = get(t, addr, "/readyz")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "[+]notifier ok\n[+]registration ok\n")
	before := opstest.Scrape(t, addr)
	assert.Equal(t, map[string]float64{"": 1}, series(before, "runner_jobs_started_total"))
	assert.Equal(t, map[string]float64{"result=ok": 0, "result=gone": 0, "result=failed": 0}, series(before, "runner_job_requeues_total"))
	assert.Equal(t, map[string]float64{"result=ok": 0, "result=gone": 0, "result=failed": 0}, series(before, "runner_job_reports_total"))
	assert.Equal(t, map[string]float64{"result=ok": 0, "result=failed": 0}, series(before, "runner_unregistrations_total"))
	assert.Equal(t, map[string]float64{"result=ok": 0, "result=failed": 0}, series(before, "runner_releases_total"))

	e.imds.SetInterruption("terminate", time.Now().Add(4*time.Second))
	got := []string{next(), next(), next()} // the third is held
	r.waitLine(`summary: imds: terminate`, 1)

	mfs := opstest.Scrape(t, addr)
	assert.Equal(t, 1.0, series(mfs, "termsig_notices_total")["event=spot/instance-action,kind=terminate,source=imds"])
	assert.EqualValues(t, 1, mfs["termsig_notice_action_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(), "the runner acted on the notice")
	assert.Equal(t, map[string]float64{"result=ok": 1, "result=gone": 0, "result=failed": 0}, series(mfs, "runner_job_requeues_total"))
	assert.Equal(t, map[string]float64{"result=ok": 0, "result=gone": 0, "result=failed": 0}, series(mfs, "runner_job_reports_total"))
	assert.Equal(t, map[string]float64{"result=ok": 1, "result=failed": 0}, series(mfs, "runner_unregistrations_total"))
	assert.Equal(t, map[string]float64{"result=ok": 1, "result=failed": 0}, series(mfs, "runner_releases_total"))
	assert.Equal(t, 2.0, series(mfs, "termsig_webhook_sends_total")["result=sent"], "the notice and the first outcome; the third is held")
	code, body = get(t, addr, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "[-]registration failed: not registered with the CI service")

	close(release)
	assert.Equal(t, 0, r.waitExit())
	assert.Equal(t, registry.JobState("queued"), e.job(job.ID).State, "re-queued")
	assert.True(t, strings.HasPrefix(got[0], "runner: imds: terminate (spot interruption: terminate)"), got[0])
	assert.True(t, strings.HasSuffix(got[0], " (runner=test-runner)"), got[0])
	assert.True(t, strings.HasPrefix(got[1], "runner: job handed back: imds: terminate"), got[1])
	assert.True(t, strings.HasSuffix(got[1], " (job=j-1, runner=test-runner)"), got[1])
	assert.True(t, strings.HasPrefix(got[2], "runner: unregistered: imds: terminate"), got[2])
	assert.True(t, strings.HasSuffix(got[2], " (runner=test-runner, runner_id=r-1)"), got[2])
	for _, s := range got {
		assert.NotContains(t, s, joinToken, "no token in what the webhook gets")
	}
}

// A bad ops flag is a usage error that names the flag: exit 2, before
// the runner registers.
func TestBadOpsFlagIsAUsageError(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--webhook-url", "ftp://example.com/hook"}, "runner: --webhook-url: "},
		{[]string{"--webhook-header", "no colon"}, "-webhook-header"},
		{[]string{"--metrics-bind-address", busy.Addr().String()}, "runner: --metrics-bind-address " + busy.Addr().String() + ": "},
		{[]string{"--health-probe-bind-address", "no-port"}, "runner: --health-probe-bind-address no-port: "},
	} {
		r := e.runner(nil, tc.args...)
		assert.Equal(t, 2, r.waitExit(), "%q", tc.args)
		assert.Contains(t, strings.Join(r.output(), "\n"), tc.says, "%q", tc.args)
		assert.Empty(t, e.runners(), "%q: nothing registered", tc.args)
	}
}

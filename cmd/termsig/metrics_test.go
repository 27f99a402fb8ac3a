//go:build linux

package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/internal/ops/opstest"
)

var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: wait}

var addrAttr = regexp.MustCompile(`addr=(\S+)`)

// boundAddr waits for termsig's log line msg and returns its addr.
func boundAddr(t *testing.T, r *run, msg string) string {
	t.Helper()
	waitLog(t, r, msg, "addr=")
	for _, l := range strings.Split(r.stderr.String(), "\n") {
		if strings.Contains(l, msg) {
			if m := addrAttr.FindStringSubmatch(l); m != nil {
				return m[1]
			}
		}
	}
	t.Fatalf("no addr in %q", msg)
	return ""
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// metricValue is the value of a counter or gauge sample; -1 when absent.
func metricValue(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	switch m := opstest.Sample(mfs, name, want); {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	default:
		return m.Gauge.GetValue()
	}
}

func TestSuperviseServesMetricsAndProbesOnTheAddressItLogs(t *testing.T) {
	srv, env := imdsEnv(t)
	r := start(t, append(env, childOn, "TERMSIG_TEST_ON_TERM=ignore", "TERMSIG_TEST_EXIT_ON=SIGUSR1"),
		append([]string{"supervise", "--sources", "imds", "--imds-interval", "20ms",
			"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"}, child()...)...)
	addr := boundAddr(t, r, "termsig: serving metrics and health probes")
	r.expect("ready")
	require.Eventually(t, func() bool {
		code, _ := httpGet(t, "http://"+addr+"/readyz")
		return code == http.StatusOK
	}, wait, 5*time.Millisecond, "ready once imds had its first look")
	code, body := httpGet(t, "http://"+addr+"/healthz")
	assert.Equal(t, http.StatusOK, code, body)

	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	assert.Equal(t, "SIGTERM", r.expect("signal"))
	var mfs map[string]*dto.MetricFamily
	require.Eventually(t, func() bool { // the child may report SIGTERM before termsig counts its action
		mfs = opstest.Scrape(t, addr)
		return opstest.Sample(mfs, "termsig_notice_action_seconds", map[string]string{}).GetHistogram().GetSampleCount() == 1
	}, wait, 5*time.Millisecond)
	assert.Equal(t, 1.0, metricValue(mfs, "termsig_notices_total", map[string]string{"source": "imds", "kind": "terminate", "event": "spot/instance-action"}))
	assert.Equal(t, 1.0, metricValue(mfs, "termsig_supervise_signals_sent_total", map[string]string{"signal": "SIGTERM"}))
	assert.Equal(t, 1.0, metricValue(mfs, "termsig_supervise_signals_sent_total", map[string]string{"signal": "SIGCONT"}))
	assert.Equal(t, 0.0, metricValue(mfs, "termsig_supervise_signals_sent_total", map[string]string{"signal": "SIGKILL"}), "at 0 before the first")
	assert.Equal(t, 1.0, metricValue(mfs, "termsig_source_state", map[string]string{"source": "imds", "state": "running"}))
	assert.Positive(t, metricValue(mfs, "termsig_source_last_heard_timestamp_seconds", map[string]string{"source": "imds"}))
	assert.Positive(t, metricValue(mfs, "process_resident_memory_bytes", map[string]string{}))

	r.signal(syscall.SIGUSR1) // forwarded: the command exits 0
	assert.Equal(t, 0, r.wait())
	_, err := httpClient.Get("http://" + addr + "/metrics")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "closed with termsig")
}

func TestHookRunsAreCountedByResult(t *testing.T) {
	r := start(t, nil, "hook", "--follow", "--sources", "signal", "--metrics-bind-address", "127.0.0.1:0", "exit 3")
	addr := boundAddr(t, r, "termsig: serving metrics")
	waitLog(t, r, "termsig: watching", "")
	r.signal(syscall.SIGHUP)
	waitLog(t, r, "termsig: hook failed", "")
	mfs := opstest.Scrape(t, addr)
	assert.Equal(t, 1.0, metricValue(mfs, "termsig_hook_runs_total", map[string]string{"result": "failed"}))
	assert.Equal(t, 0.0, metricValue(mfs, "termsig_hook_runs_total", map[string]string{"result": "ok"}))
	assert.Equal(t, 0.0, metricValue(mfs, "termsig_hook_runs_total", map[string]string{"result": "timeout"}))
	assert.Equal(t, 1.0, metricValue(mfs, "termsig_notices_total", map[string]string{"source": "signal", "kind": "reload", "event": "SIGHUP"}))
	r.signal(syscall.SIGTERM)
	assert.Equal(t, 1, r.wait(), "the hooks failed")
}

func TestPrintServesProbesAloneWhenOnlyTheyAreAsked(t *testing.T) {
	r := start(t, nil, "print", "--sources", "signal", "--health-probe-bind-address", "127.0.0.1:0")
	addr := boundAddr(t, r, "termsig: serving health probes")
	require.Eventually(t, func() bool {
		code, _ := httpGet(t, "http://"+addr+"/readyz")
		return code == http.StatusOK
	}, wait, 5*time.Millisecond)
	code, _ := httpGet(t, "http://"+addr+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	code, _ = httpGet(t, "http://"+addr+"/metrics")
	assert.Equal(t, http.StatusNotFound, code, "metrics are off unless asked")
	r.signal(syscall.SIGTERM)
	assert.Equal(t, 0, r.wait())
}

func TestABindErrorIsAUsageErrorBeforeAnythingRuns(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	addr := busy.Addr().String()
	exe, _ := os.Executable()
	for _, args := range [][]string{
		{"print", "--sources", "signal", "--metrics-bind-address", addr},
		{"hook", "--sources", "signal", "--health-probe-bind-address", addr, "true"},
		{"supervise", "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", addr, "--", exe},
		{"supervise", "--metrics-bind-address", "127.0.0.1", "--", exe},
	} {
		r := start(t, []string{childOn}, args...)
		assert.Equal(t, exitUsage, r.wait(), args)
		assert.Regexp(t, `termsig \w+: --(metrics|health-probe)-bind-address 127\.0\.0\.1\S*: listen tcp`, r.stderr.String(), args)
		assert.NotContains(t, r.stderr.String(), "command started", args)
		assert.NotContains(t, r.stderr.String(), "termsig: watching", args)
		assert.NotContains(t, r.stderr.String(), "panic", args)
	}
}

// A webhook gets the imminent notice, then, once the command has exited
// after it, the outcome with the command's status.
func TestSuperviseWebhookGetsTheNoticeAndTheCommandsExit(t *testing.T) {
	bodies := make(chan string, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
	}))
	defer rcv.Close()
	srv, env := imdsEnv(t)
	r := start(t, append(env, childOn), append([]string{"supervise", "--sources", "imds", "--imds-interval", "20ms",
		"--webhook-url", rcv.URL, "--webhook-template", `{{ .Outcome | json }} {{ index .Fields "status" | json }} {{ .Notice.Kind | json }}`}, child()...)...)
	r.expect("ready")
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	assert.Equal(t, "SIGTERM", r.expect("signal"))
	assert.Equal(t, 0, r.wait(), "the command exited 0 on SIGTERM")
	// termsig has exited: what it posted is in the channel.
	close(bodies)
	var got []string
	for b := range bodies {
		got = append(got, b)
	}
	assert.Equal(t, []string{`"" "" "terminate"`, `"command exited" "0" "terminate"`}, got)
}

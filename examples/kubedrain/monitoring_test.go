package main

import (
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/ops/opstest"
)

// httpClient keeps no idle connection, whose goroutines goleak would see.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// monitorArgs serve kubedrain's metrics and probes on a port of their
// own, one listener for both (the same address).
var monitorArgs = []string{"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"}

// hookTemplate makes the webhook's body JSON that a test can read.
const hookTemplate = `{"program":{{json .Program}},"outcome":{{json .Outcome}},"kind":{{json .Notice.Kind.String}},"fields":{{json .Fields}}}`

// addrOf returns the address kubedrain logged it serves what on
// ("metrics", "health probes").
func addrOf(t testing.TB, kd *kubedrainProc, what string) string {
	t.Helper()
	line := kd.await(t, "kubedrain: serving "+what)
	addr, _ := line["addr"].(string)
	require.NotEmpty(t, addr, "%v", line)
	return addr
}

// httpGet fetches http://addr/path and returns its status and body; a
// request that fails has status 0.
func httpGet(addr, path string) (int, string) {
	resp, err := httpClient.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sum adds the values of the samples of family name that have the labels
// of want (and any others).
func sum(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var total float64
	for _, m := range mfs[name].GetMetric() {
		l := opstest.Labels(m)
		match := true
		for k, v := range want {
			match = match && l[k] == v
		}
		if match {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// A hookEvent is one POST of hookTemplate.
type hookEvent struct {
	Program, Outcome, Kind string
	Fields                 map[string]string
}

// A hookReceiver records the webhook's POSTs.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	events []hookEvent
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev hookEvent
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		h.mu.Lock()
		h.events = append(h.events, ev)
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

// has reports whether an event with outcome (empty: a notice), kind and
// at least the fields of want was posted.
func (h *hookReceiver) has(outcome, kind string, want map[string]string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range h.events {
		if ev.Program != "kubedrain" || ev.Outcome != outcome || ev.Kind != kind {
			continue
		}
		match := true
		for k, v := range want {
			match = match && ev.Fields[k] == v
		}
		if match {
			return true
		}
	}
	return false
}

func (h *hookReceiver) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, _ := json.Marshal(h.events)
	return string(b)
}

// TestDrainMetricsProbesAndWebhook: with --metrics-bind-address,
// --health-probe-bind-address and --webhook-url, against a real
// kube-apiserver, kubedrain's series are there at 0 from the start; a
// rebalance recommendation and its withdrawal count a cordon and an
// uncordon and post "uncordoned"; a spot interruption counts the cordon,
// the taint, both evictions, the drain's duration and its notice, and
// the webhook gets the notice and the "drained" outcome, each with the
// node's name; /healthz and /readyz answer 200.
func TestDrainMetricsProbesAndWebhook(t *testing.T) {
	c, kubeconfig := setupCluster(t)
	for _, p := range []*corev1.Pod{newPod("work", "a"), newPod("work", "b")} {
		createRunningPod(t, c.Client, p)
	}
	hook := newHookReceiver(t)
	srv := imdstest.NewServer()
	defer srv.Close()
	kd := startKubedrain(t, kubeconfig, srv.URL, append(monitorArgs, "--imds-interval", "20ms", "--imds-advisory-interval", "20ms",
		"--webhook-url", hook.URL, "--webhook-template", hookTemplate, "--webhook-advice")...)
	metrics := addrOf(t, kd, "metrics and health probes")
	probes := metrics

	mfs := opstest.Scrape(t, metrics)
	for _, name := range []string{"kubedrain_node_actions_total", "kubedrain_evictions_total"} {
		for _, m := range mfs[name].GetMetric() {
			assert.Zero(t, m.GetCounter().GetValue(), "%s %v before any notice", name, opstest.Labels(m))
		}
	}
	assert.Len(t, mfs["kubedrain_node_actions_total"].GetMetric(), 6*3)
	for _, r := range []string{"evicted", "refused", "failed", "gone", "dry_run"} {
		_, ok := opstest.Value(mfs, "kubedrain_evictions_total", map[string]string{"result": r})
		assert.True(t, ok, "kubedrain_evictions_total{result=%q} is not there at 0", r)
	}
	code, body := httpGet(probes, "/healthz")
	assert.Equal(t, http.StatusOK, code, body)
	require.Eventually(t, func() bool { code, _ := httpGet(probes, "/readyz"); return code == http.StatusOK }, 10*time.Second, 20*time.Millisecond)
	_, body = httpGet(probes, "/readyz")
	assert.Contains(t, body, "[+]node ok")

	srv.SetRebalance(time.Now())
	untilNode(t, c.Client, "cordoned for rebalance", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	srv.ClearRebalance()
	untilNode(t, c.Client, "uncordoned", func(n *corev1.Node) bool { return !n.Spec.Unschedulable })
	require.Eventually(t, func() bool {
		return hook.has("uncordoned", "cleared", map[string]string{"node": testNode})
	}, 10*time.Second, 20*time.Millisecond, "webhook events: %s", hook)

	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	untilPods(t, c.Client, "work", "evictions", terminating("work/a", "work/b"))
	kd.await(t, "kubedrain: drain done")

	want := map[string]float64{
		`kubedrain_node_actions_total{action="cordon",result="ok"}`:     2, // the rebalance's, the interruption's
		`kubedrain_node_actions_total{action="uncordon",result="ok"}`:   1,
		`kubedrain_node_actions_total{action="untaint",result="ok"}`:    1,
		`kubedrain_node_actions_total{action="cordon",result="failed"}`: 0,
		`kubedrain_evictions_total{result="evicted"}`:                   2,
		`kubedrain_evictions_total{result="refused"}`:                   0,
		`kubedrain_drain_duration_seconds{result="drained"}`:            1, // its count
		`kubedrain_drain_duration_seconds{result="pods_left"}`:          0,
		`kubedrain_drain_pods_left`:                                     0,
	}
	got := func() map[string]float64 {
		mfs := opstest.Scrape(t, metrics)
		out := map[string]float64{}
		for k := range want {
			name, rest, _ := strings.Cut(k, "{")
			l := map[string]string{}
			for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					l[k] = strings.Trim(v, `"`)
				}
			}
			out[k], _ = opstest.Value(mfs, name, l)
		}
		return out
	}
	require.Eventually(t, func() bool { return maps.Equal(got(), want) }, 10*time.Second, 50*time.Millisecond, "%v", got())
	mfs = opstest.Scrape(t, metrics)
	taints, _ := opstest.Value(mfs, "kubedrain_node_actions_total", map[string]string{"action": "taint", "result": "ok"})
	assert.GreaterOrEqual(t, taints, 2.0, "the rebalance's taint, the interruption's")
	assert.GreaterOrEqual(t, sum(mfs, "termsig_notices_total", map[string]string{"source": "imds", "kind": "terminate"}), 1.0)
	assert.GreaterOrEqual(t, sum(mfs, "termsig_notices_total", map[string]string{"source": "imds", "kind": "rebalance"}), 1.0)
	action := opstest.Sample(mfs, "termsig_notice_action_seconds", map[string]string{})
	require.NotNil(t, action)
	assert.GreaterOrEqual(t, action.GetHistogram().GetSampleCount(), uint64(2))
	drained := opstest.Sample(mfs, "kubedrain_drain_duration_seconds", map[string]string{"result": "drained"})
	assert.Greater(t, drained.GetHistogram().GetSampleSum(), 0.0)
	assert.Less(t, drained.GetHistogram().GetSampleSum(), 30.0)

	require.Eventually(t, func() bool {
		return hook.has("", "terminate", map[string]string{"node": testNode}) &&
			hook.has("drained", "terminate", map[string]string{"node": testNode, "evicted": "2", "pods_left": "0"})
	}, 10*time.Second, 20*time.Millisecond, "webhook events: %s", hook)
	code, body = httpGet(probes, "/healthz")
	assert.Equal(t, http.StatusOK, code, body)
}

// TestHangingWebhookDoesNotDelayTheDrain: a webhook receiver that never
// answers holds up neither the cordon nor the evictions, and kubedrain
// still exits cleanly (0) at SIGTERM.
func TestHangingWebhookDoesNotDelayTheDrain(t *testing.T) {
	c, kubeconfig := setupCluster(t)
	createRunningPod(t, c.Client, newPod("work", "a"))
	release := make(chan struct{})
	var posts sync.WaitGroup
	hung := make(chan struct{}, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		defer posts.Done()
		select {
		case hung <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	// Cleanups run last first: kubedrain stops (registered below), then
	// the handlers are let go, then the receiver closes.
	t.Cleanup(hook.Close)
	t.Cleanup(func() { close(release) })
	srv := imdstest.NewServer()
	defer srv.Close()
	kd := startKubedrain(t, kubeconfig, srv.URL, append(monitorArgs, "--imds-interval", "20ms", "--webhook-url", hook.URL)...)
	metrics := addrOf(t, kd, "metrics")

	start := time.Now()
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	untilNode(t, c.Client, "cordoned", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	untilPods(t, c.Client, "work", "evictions", terminating("work/a"))
	took := time.Since(start)
	select {
	case <-hung:
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook was never posted to")
	}
	assert.Less(t, took, 5*time.Second, "the cordon and the evictions waited for the webhook")
	kd.await(t, "kubedrain: drain done")
	mfs := opstest.Scrape(t, metrics)
	v, _ := opstest.Value(mfs, "kubedrain_evictions_total", map[string]string{"result": "evicted"})
	assert.Equal(t, 1.0, v)
	stopped := time.Now()
	kd.stop(t)
	assert.Less(t, time.Since(stopped), 9*time.Second, "the exit waited for the webhook past its bound")
}

// A gate stands between kubedrain and the API server: it holds the
// connections, closes them, or lets them through.
type gate struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	mode   string // "hold", "refuse" or "open"
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newGate(t *testing.T, target string) *gate {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &gate{l: l, target: target, mode: "hold"}
	g.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			g.mu.Lock()
			g.conns = append(g.conns, c)
			mode := g.mode
			g.mu.Unlock()
			switch mode {
			case "refuse":
				c.Close()
			case "open":
				g.pipe(c)
			}
		}
	})
	t.Cleanup(func() {
		l.Close()
		g.mu.Lock()
		for _, c := range g.conns {
			c.Close()
		}
		g.mu.Unlock()
		g.wg.Wait()
	})
	return g
}

// pipe connects c to the target.
func (g *gate) pipe(c net.Conn) {
	u, err := net.Dial("tcp", g.target)
	if err != nil {
		c.Close()
		return
	}
	g.mu.Lock()
	g.conns = append(g.conns, u)
	g.mu.Unlock()
	for _, p := range [][2]net.Conn{{u, c}, {c, u}} {
		g.wg.Go(func() {
			defer p[0].Close()
			_, _ = io.Copy(p[0], p[1])
		})
	}
}

// set changes the mode, and closes the connections held so far.
func (g *gate) set(mode string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mode == "hold" {
		for _, c := range g.conns {
			c.Close()
		}
	}
	g.mode = mode
}

// startKubedrainNoWait starts kubedrain as startKubedrain does, without
// waiting for it to watch: it reads the node first.
func startKubedrainNoWait(t *testing.T, kubeconfig, imdsURL string, args ...string) *kubedrainProc {
	t.Helper()
	bin, err := buildKubedrain()
	require.NoError(t, err)
	args = append([]string{"--node", testNode, "--kubeconfig", kubeconfig, "--sources", "imds", "--log-level", "debug"}, args...)
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
	return p
}

// TestReadyzWaitsForTheFirstNodeRead: /readyz answers 503 "no node read
// yet" while kubedrain's first read of its node hangs, 503 with the
// read's error while the API server cannot be reached, and 200 once a
// read has worked, which kubedrain tries again by itself without a
// notice; /healthz answers 200 all along.
func TestReadyzWaitsForTheFirstNodeRead(t *testing.T) {
	c, _ := setupCluster(t)
	cfg := c.ServiceAccountConfig(t, "kube-system", "kubedrain")
	u, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	g := newGate(t, u.Host)
	pc := rest.CopyConfig(cfg)
	pc.Host = "https://" + g.l.Addr().String()
	kubeconfig := c.Kubeconfig(t, pc)
	srv := imdstest.NewServer()
	defer srv.Close()
	kd := startKubedrainNoWait(t, kubeconfig, srv.URL, "--health-probe-bind-address", "127.0.0.1:0", "--imds-interval", "20ms")
	probes := addrOf(t, kd, "health probes")

	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = httpGet(probes, "/readyz")
		return strings.Contains(body, "[-]node failed: no node read yet")
	}, 10*time.Second, 20*time.Millisecond, "%d %s", code, body)
	assert.Equal(t, http.StatusServiceUnavailable, code, body)
	code, body = httpGet(probes, "/healthz")
	assert.Equal(t, http.StatusOK, code, body)

	g.set("refuse")
	require.Eventually(t, func() bool {
		code, body = httpGet(probes, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "[-]node failed: ") && !strings.Contains(body, "no node read yet")
	}, 40*time.Second, 20*time.Millisecond, "%d %s", code, body)
	kd.await(t, "kubedrain: watching")

	g.set("open")
	require.Eventually(t, func() bool {
		code, body = httpGet(probes, "/readyz")
		return code == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond, "%d %s", code, body)
	assert.Contains(t, body, "[+]node ok")
	assert.Contains(t, body, "[+]notifier ok")
	code, body = httpGet(probes, "/healthz")
	assert.Equal(t, http.StatusOK, code, body)
}

// TestOpsAddressInUseIsAUsageError: a --metrics-bind-address that cannot
// be listened on stops kubedrain at start, as a bad flag does: exit 2,
// the flag named, the usage line.
func TestOpsAddressInUseIsAUsageError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	var stderr strings.Builder
	code := realMain([]string{"--node", "n", "--metrics-bind-address", l.Addr().String()}, io.Discard, &stderr)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr.String(), "kubedrain: --metrics-bind-address "+l.Addr().String())
	assert.Contains(t, stderr.String(), usageLine)
}

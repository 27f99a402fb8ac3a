package ops_test

import (
	"io"
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/internal/ops"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait for something that should happen at once.
const wait = 10 * time.Second

// client keeps no idle connection, whose goroutines goleak would see.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: wait}

// start starts a Server for cfg, closed when the test ends.
func start(t *testing.T, cfg ops.Config) *ops.Server {
	t.Helper()
	s, err := ops.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// get fetches http://addr/path and returns its status and body.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := client.Get("http://" + addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// scrape fetches /metrics from addr and parses the exposition text.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := client.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return mfs
}

// labels returns m's labels as a map.
func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, lp := range m.GetLabel() {
		l[lp.GetName()] = lp.GetValue()
	}
	return l
}

// find returns the sample of family name whose labels are want, if any.
func find(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	for _, m := range mfs[name].GetMetric() {
		if maps.Equal(labels(m), want) {
			return m
		}
	}
	return nil
}

// value is the value of a counter or gauge sample of family name with
// labels want; ok is false when there is none.
func value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	m := find(mfs, name, want)
	switch {
	case m == nil:
		return 0, false
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	}
	return 0, false
}

// A clock is a time a test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 2, 1, 20, 18, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

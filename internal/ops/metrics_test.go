package ops_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/internal/ops/opstest"
	"github.com/termsig/termsig/termsigtest"
)

// take receives one notice from n, or fails the test.
func take(t *testing.T, n *termsig.Notifier) termsig.Notice {
	t.Helper()
	select {
	case nt := <-n.C():
		return nt
	case <-time.After(wait):
		t.Fatal("no notice")
	}
	return termsig.Notice{}
}

func TestNoticesFromAFakeAreCountedBySourceKindAndEvent(t *testing.T) {
	spot := termsigtest.NewFake("imds")
	n := termsig.New(spot)
	defer n.Stop()
	s := start(t, ops.Config{MetricsAddr: "127.0.0.1:0"})
	s.Watch(n)
	before := time.Now()
	spot.Send(termsig.Notice{Kind: termsig.Rebalance, Event: "rebalance"})
	spot.Send(termsig.Notice{Kind: termsig.Rebalance, Event: "rebalance"})
	spot.Send(termsig.Notice{Kind: termsig.Terminate, Event: "spot/instance-action", Deadline: time.Now().Add(2 * time.Minute)})
	for range 3 {
		nt := take(t, n)
		s.Noticed(nt)
		if nt.Kind == termsig.Terminate {
			s.Acted(nt)
		}
	}
	after := time.Now()

	mfs := opstest.Scrape(t, s.MetricsAddr())
	require.Equal(t, dto.MetricType_COUNTER, mfs["termsig_notices_total"].GetType())
	got, _ := opstest.Value(mfs, "termsig_notices_total", map[string]string{"source": "imds", "kind": "rebalance", "event": "rebalance"})
	assert.Equal(t, 2.0, got)
	got, _ = opstest.Value(mfs, "termsig_notices_total", map[string]string{"source": "imds", "kind": "terminate", "event": "spot/instance-action"})
	assert.Equal(t, 1.0, got)
	assert.Len(t, mfs["termsig_notices_total"].GetMetric(), 2)

	h := opstest.Sample(mfs, "termsig_notice_action_seconds", map[string]string{}).GetHistogram()
	require.NotNil(t, h, "the histogram")
	assert.Equal(t, uint64(1), h.GetSampleCount(), "one notice acted on")
	assert.Less(t, h.GetSampleSum(), after.Sub(before).Seconds()+1)

	for _, state := range []string{"running", "unavailable", "failed", "stopped"} {
		v, ok := opstest.Value(mfs, "termsig_source_state", map[string]string{"source": "imds", "state": state})
		assert.True(t, ok, state)
		assert.Equal(t, map[bool]float64{true: 1}[state == "running"], v, state)
	}
	heard, ok := opstest.Value(mfs, "termsig_source_last_heard_timestamp_seconds", map[string]string{"source": "imds"})
	require.True(t, ok, "the fake sent notices: it heard from its origin")
	assert.GreaterOrEqual(t, heard, float64(before.UnixNano())/1e9-0.001)
	assert.LessOrEqual(t, heard, float64(after.UnixNano())/1e9+0.001)

	assert.NotEmpty(t, mfs["go_goroutines"].GetMetric(), "the Go collector")
	if runtime.GOOS == "linux" {
		assert.NotEmpty(t, mfs["process_resident_memory_bytes"].GetMetric(), "the process collector")
	}
}

func TestASourceThatNeverHeardHasNoLastHeardTimestamp(t *testing.T) {
	quiet := termsigtest.NewFake("gcemeta")
	n := termsig.New(quiet)
	defer n.Stop()
	s := start(t, ops.Config{MetricsAddr: "127.0.0.1:0"})
	s.Watch(n)
	mfs := opstest.Scrape(t, s.MetricsAddr())
	_, ok := opstest.Value(mfs, "termsig_source_last_heard_timestamp_seconds", map[string]string{"source": "gcemeta"})
	assert.False(t, ok)
	_, ok = opstest.Value(mfs, "termsig_source_state", map[string]string{"source": "gcemeta", "state": "running"})
	assert.True(t, ok)
}

func TestSourceStateGaugeFollowsTheNotifiersStatus(t *testing.T) {
	for _, tc := range []struct {
		state string
		end   func(*termsigtest.Fake, *termsig.Notifier)
	}{
		{"failed", func(f *termsigtest.Fake, _ *termsig.Notifier) { f.Fail(errors.New("boom")) }},
		{"unavailable", func(f *termsigtest.Fake, _ *termsig.Notifier) {
			f.Fail(fmt.Errorf("not here: %w", termsig.ErrUnavailable))
		}},
		{"stopped", func(_ *termsigtest.Fake, n *termsig.Notifier) { n.Stop() }},
	} {
		t.Run(tc.state, func(t *testing.T) {
			f := termsigtest.NewFake("azure")
			n := termsig.New(f)
			defer n.Stop()
			s := start(t, ops.Config{MetricsAddr: "127.0.0.1:0"})
			s.Watch(n)
			v, _ := opstest.Value(opstest.Scrape(t, s.MetricsAddr()), "termsig_source_state", map[string]string{"source": "azure", "state": "running"})
			assert.Equal(t, 1.0, v)
			tc.end(f, n)
			require.Eventually(t, func() bool {
				v, _ := opstest.Value(opstest.Scrape(t, s.MetricsAddr()), "termsig_source_state", map[string]string{"source": "azure", "state": tc.state})
				return v == 1
			}, wait, time.Millisecond)
			v, _ = opstest.Value(opstest.Scrape(t, s.MetricsAddr()), "termsig_source_state", map[string]string{"source": "azure", "state": "running"})
			assert.Equal(t, 0.0, v, "one state at a time")
		})
	}
}

func TestEventLabelsAreCappedPerSourceThenCountAsOther(t *testing.T) {
	s := start(t, ops.Config{MetricsAddr: "127.0.0.1:0"})
	extra := 6
	for i := range ops.MaxEventsPerSource + extra {
		s.Noticed(termsig.Notice{Source: "azure", Kind: termsig.Maintenance, Event: fmt.Sprintf("scheduled/%d", i)})
	}
	s.Noticed(termsig.Notice{Source: "azure", Kind: termsig.Maintenance, Event: "scheduled/0"})
	s.Noticed(termsig.Notice{Source: "gcemeta", Kind: termsig.Terminate, Event: "preempted"})

	mfs := opstest.Scrape(t, s.MetricsAddr())
	azure := 0
	for _, m := range mfs["termsig_notices_total"].GetMetric() {
		if opstest.Labels(m)["source"] == "azure" {
			azure++
		}
	}
	assert.Equal(t, ops.MaxEventsPerSource+1, azure, "the first events and other")
	other, _ := opstest.Value(mfs, "termsig_notices_total", map[string]string{"source": "azure", "kind": "maintenance", "event": ops.OtherEvent})
	assert.Equal(t, float64(extra), other)
	first, _ := opstest.Value(mfs, "termsig_notices_total", map[string]string{"source": "azure", "kind": "maintenance", "event": "scheduled/0"})
	assert.Equal(t, 2.0, first, "an event seen before the cap keeps its label")
	gce, _ := opstest.Value(mfs, "termsig_notices_total", map[string]string{"source": "gcemeta", "kind": "terminate", "event": "preempted"})
	assert.Equal(t, 1.0, gce, "the cap is per source")
}

func TestEventsThatAreNotUTF8OrLongAreCountedNotPanicked(t *testing.T) {
	s := start(t, ops.Config{MetricsAddr: "127.0.0.1:0"})
	s.Noticed(termsig.Notice{Source: "azure", Kind: termsig.Maintenance, Event: "scheduled/\xff\xfe"})
	s.Noticed(termsig.Notice{Source: "azure", Kind: termsig.Maintenance, Event: strings.Repeat("é", 1000)})
	mfs := opstest.Scrape(t, s.MetricsAddr())
	require.Len(t, mfs["termsig_notices_total"].GetMetric(), 2)
	for _, m := range mfs["termsig_notices_total"].GetMetric() {
		assert.LessOrEqual(t, len(opstest.Labels(m)["event"]), 128)
	}
	_, ok := opstest.Value(mfs, "termsig_notices_total", map[string]string{"source": "azure", "kind": "maintenance", "event": "scheduled/\uFFFD"})
	assert.True(t, ok)
}

func TestActedObservesTheTimeFromObserved(t *testing.T) {
	clk := newClock()
	s := start(t, ops.Config{MetricsAddr: "127.0.0.1:0", Now: clk.Now})
	s.Acted(termsig.Notice{Source: "imds", Kind: termsig.Terminate, Observed: clk.Now().Add(-1500 * time.Millisecond)})
	s.Acted(termsig.Notice{Source: "imds", Kind: termsig.Terminate}) // no Observed: not from a Notifier
	h := opstest.Sample(opstest.Scrape(t, s.MetricsAddr()), "termsig_notice_action_seconds", map[string]string{}).GetHistogram()
	require.NotNil(t, h)
	assert.Equal(t, uint64(1), h.GetSampleCount())
	assert.InDelta(t, 1.5, h.GetSampleSum(), 1e-9)
	for _, b := range h.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 1.5 {
			want = 1
		}
		assert.Equal(t, want, b.GetCumulativeCount(), "le=%v", b.GetUpperBound())
	}
}

func TestTheProgramsOwnMetricsAreServed(t *testing.T) {
	s := start(t, ops.Config{MetricsAddr: "127.0.0.1:0"})
	sent := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "demo_signals_sent_total", Help: "Signals sent."}, []string{"signal"})
	s.Registerer().MustRegister(sent)
	sent.WithLabelValues("SIGTERM").Inc()
	v, ok := opstest.Value(opstest.Scrape(t, s.MetricsAddr()), "demo_signals_sent_total", map[string]string{"signal": "SIGTERM"})
	assert.True(t, ok)
	assert.Equal(t, 1.0, v)
}

// Every metric the Server serves, the webhook's and a program's included,
// passes Prometheus' own linter (names, units, suffixes, help).
func TestEveryMetricFollowsPrometheusNamingRules(t *testing.T) {
	spot := termsigtest.NewFake("imds")
	n := termsig.New(spot)
	defer n.Stop()
	rcv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rcv.Close()
	s := start(t, ops.Config{Name: "kubedrain", MetricsAddr: "127.0.0.1:0", Webhook: ops.WebhookConfig{URL: rcv.URL}})
	s.Watch(n)
	spot.Send(termsig.Notice{Kind: termsig.Terminate, Event: "spot/instance-action"})
	nt := take(t, n)
	s.Noticed(nt)
	s.Acted(nt)
	s.Registerer().MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "kubedrain_cordons_total", Help: "Cordons."}))
	resp, err := client.Get("http://" + s.MetricsAddr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	problems, err := promlint.New(resp.Body).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// Package opstest reads what a program's internal/ops Server serves, for
// its tests: /metrics scraped over HTTP and parsed as Prometheus parses
// it, and the samples in it.
package opstest

import (
	"maps"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// client keeps no idle connection, whose goroutines goleak would see.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// Scrape fetches http://addr/metrics and parses the exposition text; a
// failed request, a status other than 200 or text that does not parse
// fails t.
func Scrape(t testing.TB, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return mfs
}

// Labels returns m's labels as a map.
func Labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, lp := range m.GetLabel() {
		l[lp.GetName()] = lp.GetValue()
	}
	return l
}

// Sample returns the sample of family name whose labels are exactly
// want, or nil.
func Sample(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	for _, m := range mfs[name].GetMetric() {
		if maps.Equal(Labels(m), want) {
			return m
		}
	}
	return nil
}

// Value is the value of the counter or gauge sample of family name with
// labels want, or the count of such a histogram; ok is false when there
// is no such sample.
func Value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	m := Sample(mfs, name, want)
	switch {
	case m == nil:
		return 0, false
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true
	}
	return 0, false
}

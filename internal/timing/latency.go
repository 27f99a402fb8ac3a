package timing

import (
	"slices"
	"testing"
	"time"
)

// Percentile returns the p-th percentile of sorted, by nearest rank.
func Percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

// Report sorts lat and reports its mean, 50th and 99th percentiles and
// maximum in milliseconds, and the number of trials, as b's metrics.
func Report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(sum/time.Duration(len(lat))), "mean-ms")
	b.ReportMetric(ms(Percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(Percentile(lat, 99)), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(float64(len(lat)), "trials")
}

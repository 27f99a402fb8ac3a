//go:build linux

package main

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/termsig/termsig/imds/imdstest"
)

// BenchmarkSpotToCommandSIGTERM measures, over 100 trials per interval,
// the time from the fake IMDS starting to answer a spot interruption to
// the supervised command receiving SIGTERM (its own clock, read in its
// signal handler). Each trial starts a termsig supervise, waits for its first poll,
// then flips the answer at a phase spread evenly over the polling
// interval. Run it with
//
//	go test -run XXX -bench SpotToCommandSIGTERM -benchtime 1x ./cmd/termsig
func BenchmarkSpotToCommandSIGTERM(b *testing.B) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
	}{{"interval=100ms", 100 * time.Millisecond}, {"interval=default(1s)", time.Second}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				lat := spotTrials(b, tc.interval, 100)
				slices.Sort(lat)
				ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
				b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
				b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
				b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
			}
		})
	}
}

func spotTrials(b *testing.B, interval time.Duration, trials int) []time.Duration {
	srv := imdstest.NewServer()
	defer srv.Close()
	env := []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + srv.URL, "AWS_EC2_METADATA_DISABLED=", childOn}
	args := append([]string{"supervise", "--sources", "imds", "--imds-interval", interval.String()}, child()...)
	var lat []time.Duration
	for i := range trials {
		srv.ClearInterruption()
		r := start(b, env, args...)
		first := srv.Requests(imdstest.PathInstanceAction)
		for srv.Requests(imdstest.PathInstanceAction) == first {
			time.Sleep(time.Millisecond) // a harness: wait for termsig's first poll
		}
		time.Sleep(interval * time.Duration(i) / time.Duration(trials)) // the phase
		flipped := time.Now()
		srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
		got := r.expect("at SIGTERM")
		ns, err := strconv.ParseInt(got, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Unix(0, ns).Sub(flipped))
		<-r.exited
	}
	return lat
}

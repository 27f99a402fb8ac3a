//go:build linux

package main

import (
	"io"
	"net/http"
	"net/http/httptest"
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

// BenchmarkSpotToWebhook measures, over 50 trials per interval, the time
// from the fake IMDS starting to answer a spot interruption to a webhook
// receiver on loopback having termsig supervise's POST, and, within it,
// from the notice's Observed to the POST's arrival (termsig's own part).
// The trials are those of BenchmarkSpotToCommandSIGTERM. Run it with
//
//	go test -run XXX -bench SpotToWebhook -benchtime 1x ./cmd/termsig
func BenchmarkSpotToWebhook(b *testing.B) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
	}{{"interval=100ms", 100 * time.Millisecond}, {"interval=default(1s)", time.Second}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				fromFlip, fromObserved := webhookTrials(b, tc.interval, 50)
				ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
				for _, m := range []struct {
					unit string
					lat  []time.Duration
				}{{"flip", fromFlip}, {"observed", fromObserved}} {
					slices.Sort(m.lat)
					b.ReportMetric(ms(m.lat[len(m.lat)/2]), m.unit+"-p50-ms")
					b.ReportMetric(ms(m.lat[len(m.lat)*99/100]), m.unit+"-p99-ms")
				}
			}
		})
	}
}

func webhookTrials(b *testing.B, interval time.Duration, trials int) (fromFlip, fromObserved []time.Duration) {
	type post struct {
		at       time.Time
		observed int64
	}
	posts := make(chan post, 1)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		ns, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return
		}
		posts <- post{at, ns}
	}))
	defer rcv.Close()
	srv := imdstest.NewServer()
	defer srv.Close()
	env := []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + srv.URL, "AWS_EC2_METADATA_DISABLED=", childOn}
	// The outcome, posted after the command's exit, has no number for a body.
	args := append([]string{"supervise", "--sources", "imds", "--imds-interval", interval.String(),
		"--webhook-url", rcv.URL, "--webhook-template", `{{ if not .Outcome }}{{ .Notice.Observed.UnixNano }}{{ end }}`}, child()...)
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
		p := <-posts
		fromFlip = append(fromFlip, p.at.Sub(flipped))
		fromObserved = append(fromObserved, p.at.Sub(time.Unix(0, p.observed)))
		r.expect("at SIGTERM")
		<-r.exited
	}
	return fromFlip, fromObserved
}

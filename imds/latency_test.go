package imds_test

import (
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
)

var (
	trials  = flag.Int("imds.trials", 200, "trials per latency benchmark")
	workers = flag.Int("imds.workers", 10, "fake IMDS and source pairs that run trials side by side")
)

// BenchmarkDetectionLatency measures the time from the moment the fake IMDS
// starts answering 200 on spot/instance-action to the notice on
// Notifier.C, over -imds.trials trials, at Interval 1 s (the default),
// 100 ms, and 2 s, which stands for the reference handler's fixed 2-second
// poller. The trials flip the answer at phases spread evenly over the
// polling cycle. Workers run trials side by side, each with its own fake and
// source, to keep the wall time down; the CPU is nearly idle throughout.
//
//	go test -run XXX -bench DetectionLatency -benchtime 1x ./imds
func BenchmarkDetectionLatency(b *testing.B) {
	for _, interval := range []time.Duration{time.Second, 100 * time.Millisecond, 2 * time.Second} {
		b.Run("interval="+interval.String(), func(b *testing.B) {
			for b.Loop() {
				lat := measureLatency(b, interval, *trials, *workers)
				slices.Sort(lat)
				var sum time.Duration
				for _, d := range lat {
					sum += d
				}
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(ms(sum/time.Duration(len(lat))), "mean-ms")
				b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
				b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
				b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
				b.ReportMetric(float64(len(lat)), "trials")
			}
		})
	}
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

func measureLatency(b *testing.B, interval time.Duration, trials, workers int) []time.Duration {
	var (
		mu  sync.Mutex
		lat []time.Duration
		wg  sync.WaitGroup
	)
	per := (trials + workers - 1) / workers
	for w := range workers {
		wg.Go(func() {
			srv := imdstest.NewServer()
			defer srv.Close()
			n := termsig.New(imds.New(imds.Config{Endpoint: srv.URL, Interval: interval, Events: imds.SpotInterruption}))
			defer n.Stop()
			for i := range per {
				// Clear, and let the source see two 404s, so that the next
				// interruption is news to it.
				srv.ClearInterruption()
				if err := answered(srv, imdstest.PathInstanceAction, 2); err != nil {
					b.Error(err)
					return
				}
				// answered returns just after a poll, so this sleep sets the
				// phase of the flip in the polling cycle. The phases are
				// spread evenly over the cycle (stratified), so that the
				// mean is not at the mercy of a few random draws.
				k := i*workers + w
				time.Sleep(time.Duration((float64(k) + 0.5) / float64(per*workers) * float64(interval)))
				flip := time.Now()
				srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
				select {
				case <-n.C():
				case <-time.After(interval + 5*time.Second):
					b.Error("no notice")
					return
				}
				d := time.Since(flip)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(lat) == 0 {
		b.Fatal("no trial completed")
	}
	return lat
}

// answered waits until srv has answered k more requests for path.
func answered(srv *imdstest.Server, path string, k int) error {
	target := srv.Requests(path) + k
	timeout := time.After(time.Minute)
	for {
		served := srv.Served()
		if srv.Requests(path) >= target {
			return nil
		}
		select {
		case <-served:
		case <-timeout:
			return fmt.Errorf("%s not polled", path)
		}
	}
}

// BenchmarkIdleRequests counts the requests a source makes at the defaults
// against an IMDS with nothing pending, over one real minute, and reports
// them per minute and per second.
//
//	go test -run XXX -bench IdleRequests -benchtime 1x ./imds
func BenchmarkIdleRequests(b *testing.B) {
	for b.Loop() {
		srv := imdstest.NewServer()
		n := termsig.New(imds.New(imds.Config{Endpoint: srv.URL}))
		time.Sleep(time.Minute)
		n.Stop()
		total := 0
		for _, p := range []string{imdstest.PathInstanceAction, imdstest.PathLifecycle, imdstest.PathRebalance, imdstest.PathScheduled, "api/token"} {
			c := srv.Requests(p)
			total += c
			b.ReportMetric(float64(c), p+"/min")
		}
		srv.Close()
		b.ReportMetric(float64(total), "requests/min")
		b.ReportMetric(float64(total)/60, "requests/s")
	}
}

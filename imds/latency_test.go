package imds_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/timing"
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
				timing.Report(b, measureLatency(b, interval, *trials, *workers))
			}
		})
	}
}

// measureLatency runs trials of a spot interruption at phases spread over
// the cycle of a source that polls every interval.
func measureLatency(b *testing.B, interval time.Duration, trials, workers int) []time.Duration {
	cfg := imds.Config{Interval: interval, Events: imds.SpotInterruption}
	return runTrials(b, cfg, trials, workers, func(srv *imdstest.Server, n *termsig.Notifier, phase float64) (time.Duration, error) {
		// Clear, and let the source see two 404s, so that the next
		// interruption is news to it.
		srv.ClearInterruption()
		if err := answered(srv, imdstest.PathInstanceAction, 2); err != nil {
			return 0, err
		}
		// answered returns just after a poll, so this sleep sets the
		// phase of the flip in the polling cycle.
		time.Sleep(time.Duration(phase * float64(interval)))
		flip := time.Now()
		srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
		err := next(n, termsig.Terminate)
		return time.Since(flip), err
	})
}

// runTrials runs trials, workers side by side, each worker with its own
// fake and a source configured by cfg, and returns the latency of each.
// The phases (0 to 1) of the trials are spread evenly (stratified), so
// that the mean is not at the mercy of a few random draws.
func runTrials(b *testing.B, cfg imds.Config, trials, workers int, trial func(*imdstest.Server, *termsig.Notifier, float64) (time.Duration, error)) []time.Duration {
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
			cfg := cfg
			cfg.Endpoint = srv.URL
			n := termsig.New(imds.New(cfg))
			defer n.Stop()
			for i := range per {
				d, err := trial(srv, n, (float64(i*workers+w)+0.5)/float64(per*workers))
				if err != nil {
					b.Error(err)
					return
				}
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
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Minute, fmt.Errorf("%s not polled", path))
	defer cancel()
	return srv.AwaitRequests(ctx, path, srv.Requests(path)+k)
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

// BenchmarkAfterRebalance measures, at the default intervals, the time from
// a spot interruption that follows a rebalance recommendation by 5 s or
// more to its notice on Notifier.C: the recommendation puts the urgent
// paths at FastInterval. The recommendation appears at phases spread over
// the AdvisoryInterval cycle, and the interruption 5 s later at phases
// spread over the FastInterval cycle.
//
//	go test -run XXX -bench AfterRebalance -benchtime 1x ./imds
func BenchmarkAfterRebalance(b *testing.B) {
	for b.Loop() {
		timing.Report(b, runTrials(b, imds.Config{}, *trials, *workers*2, rebalanceTrial))
	}
}

// rebalanceTrial runs one trial at phase (0 to 1) of both cycles, and
// leaves the fake and the source with nothing pending.
func rebalanceTrial(srv *imdstest.Server, n *termsig.Notifier, phase float64) (time.Duration, error) {
	if err := answered(srv, imdstest.PathRebalance, 1); err != nil {
		return 0, err
	}
	time.Sleep(time.Duration(phase * float64(imds.DefaultAdvisoryInterval)))
	advised := time.Now()
	srv.SetRebalance(advised)
	if err := next(n, termsig.Rebalance); err != nil {
		return 0, err
	}
	time.Sleep(time.Until(advised.Add(5*time.Second + time.Duration(phase*float64(imds.DefaultFastInterval)))))
	flip := time.Now()
	srv.SetInterruption("terminate", flip.Add(2*time.Minute))
	if err := next(n, termsig.Terminate); err != nil {
		return 0, err
	}
	d := time.Since(flip)
	srv.ClearInterruption()
	srv.ClearRebalance()
	if err := next(n, termsig.Cleared); err != nil {
		return 0, err
	}
	// The interruption's 404 seen twice, so that the next is news.
	return d, answered(srv, imdstest.PathInstanceAction, 2)
}

// next waits for a notice of kind on n.C.
func next(n *termsig.Notifier, kind termsig.Kind) error {
	select {
	case nt := <-n.C():
		if nt.Kind != kind {
			return fmt.Errorf("got %v, want a %v notice", nt, kind)
		}
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("no %v notice", kind)
	}
}

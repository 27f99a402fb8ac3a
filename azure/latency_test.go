package azure_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/internal/timing"
)

var (
	trials  = flag.Int("azure.trials", 200, "trials per latency benchmark")
	workers = flag.Int("azure.workers", 10, "fake IMDS and source pairs that run detection trials side by side")
)

var quietNotifier = termsig.Config{Logger: slog.New(slog.DiscardHandler)}

// BenchmarkDetectionLatency measures the time from the moment an event
// appears in the fake's document (SetEvents) to its notice on
// Notifier.C, over -azure.trials trials, at Interval 1 s (the default)
// and 100 ms. The events appear at phases spread evenly over the polling
// cycle (stratified), so that the mean is not at the mercy of a few
// random draws: the mean is about half the interval, the maximum about
// the interval. Workers run trials side by side, each with its own fake
// and source, to keep the wall time down; the CPU is nearly idle
// throughout.
//
//	go test -run XXX -bench DetectionLatency -benchtime 1x ./azure
func BenchmarkDetectionLatency(b *testing.B) {
	for _, interval := range []time.Duration{time.Second, 100 * time.Millisecond} {
		b.Run("interval="+interval.String(), func(b *testing.B) {
			for b.Loop() {
				lat := measureDetection(b, interval, *trials, *workers)
				timing.Report(b, lat)
			}
		})
	}
}

func measureDetection(b *testing.B, interval time.Duration, trials, workers int) []time.Duration {
	var (
		mu  sync.Mutex
		lat []time.Duration
		wg  sync.WaitGroup
	)
	per := (trials + workers - 1) / workers
	for w := range workers {
		wg.Go(func() {
			srv := azuretest.NewServer()
			defer srv.Close()
			n := quietNotifier.New(azure.New(azure.Config{Endpoint: srv.URL, Interval: interval, Logger: slog.New(slog.DiscardHandler)}))
			defer n.Stop()
			next := func() (termsig.Notice, bool) {
				select {
				case nt := <-n.C():
					return nt, true
				case <-time.After(interval + 5*time.Second):
					b.Error("no notice")
					return termsig.Notice{}, false
				}
			}
			// Wait for a poll to be answered: the phase is counted from
			// there. In later trials, the Cleared notice of the last one
			// has just come from a poll.
			if err := answered(srv, azuretest.PathScheduledEvents, 1); err != nil {
				b.Error(err)
				return
			}
			for i := range per {
				k := i*workers + w
				time.Sleep(time.Duration((float64(k) + 0.5) / float64(per*workers) * float64(interval)))
				appeared := time.Now()
				srv.SetEvents(azuretest.Event{EventID: "e" + strconv.Itoa(i), EventType: "Preempt", NotBefore: time.Now().Add(30 * time.Second)})
				if _, ok := next(); !ok {
					return
				}
				d := time.Since(appeared)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				// Gone again, so that the next trial starts from an empty
				// document.
				srv.SetEvents()
				if nt, ok := next(); !ok || nt.Kind != termsig.Cleared {
					b.Errorf("want Cleared, got %v", nt)
					return
				}
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
func answered(srv *azuretest.Server, path string, k int) error {
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Minute, fmt.Errorf("%s not polled", path))
	defer cancel()
	return srv.AwaitRequests(ctx, path, srv.Requests(path)+k)
}

// BenchmarkIdleRequests counts the requests a source makes at the defaults
// against a fake with no events, over one real minute, and reports them
// per minute (by path) and per second.
//
//	go test -run XXX -bench IdleRequests -benchtime 1x ./azure
func BenchmarkIdleRequests(b *testing.B) {
	for b.Loop() {
		srv := azuretest.NewServer()
		n := quietNotifier.New(azure.New(azure.Config{Endpoint: srv.URL, Logger: slog.New(slog.DiscardHandler)}))
		<-time.After(time.Minute)
		n.Stop()
		total := 0
		for _, p := range []string{azuretest.PathScheduledEvents, azuretest.PathVMName, "POST"} {
			c := srv.Requests(p)
			total += c
			b.ReportMetric(float64(c), p+"/min")
		}
		srv.Close()
		b.ReportMetric(float64(total), "requests/min")
		b.ReportMetric(float64(total)/60, "requests/s")
	}
}

// BenchmarkReleaseLatency measures, over -azure.trials trials, the time
// from Notifier.Release to the fake's having the StartRequest: a new
// connection (the acknowledgement's client is its own), the POST, and the
// fake's recording it. Each trial schedules a new event and waits for its
// notice first; Interval is FloorInterval so that trials do not wait for
// polls, which Release does not depend on.
//
//	go test -run XXX -bench ReleaseLatency -benchtime 1x ./azure
func BenchmarkReleaseLatency(b *testing.B) {
	for b.Loop() {
		timing.Report(b, measureRelease(b, *trials))
	}
}

func measureRelease(b *testing.B, trials int) []time.Duration {
	srv := azuretest.NewServer()
	defer srv.Close()
	n := quietNotifier.New(azure.New(azure.Config{Endpoint: srv.URL, Interval: azure.FloorInterval, Logger: slog.New(slog.DiscardHandler)}))
	defer n.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	next := func() termsig.Notice {
		select {
		case nt := <-n.C():
			return nt
		case <-time.After(wait):
			b.Fatal("no notice")
		}
		return termsig.Notice{}
	}
	var lat []time.Duration
	for i := range trials {
		srv.SetEvents(azuretest.Event{EventID: "e" + strconv.Itoa(i), EventType: "Preempt", NotBefore: time.Now().Add(30 * time.Second)})
		nt := next()
		recorded := make(chan time.Time, 1)
		go func() {
			defer close(recorded)
			if _, err := srv.WaitStartRequests(ctx, i+1); err == nil {
				recorded <- time.Now()
			}
		}()
		begin := time.Now()
		if err := n.Release(ctx, nt); err != nil {
			b.Fatal(err)
		}
		at, ok := <-recorded
		if !ok {
			b.Fatal("no StartRequest")
		}
		lat = append(lat, at.Sub(begin))
		if started := next(); started.Event != nt.Event || started.Kind == termsig.Cleared { // the event started
			b.Fatalf("want %s started, got %v", nt.Event, started)
		}
		srv.SetEvents()
		if gone := next(); gone.Kind != termsig.Cleared {
			b.Fatalf("want Cleared, got %v", gone)
		}
	}
	return lat
}

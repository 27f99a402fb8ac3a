package alibaba_test

import (
	"flag"
	"log/slog"
	"testing"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/internal/spotpoll/spotpolltest"
	"github.com/termsig/termsig/internal/timing"
)

var (
	trials  = flag.Int("alibaba.trials", 200, "trials per latency benchmark")
	workers = flag.Int("alibaba.workers", 10, "fake and source pairs that run trials side by side")
)

// BenchmarkDetectionLatency measures the time from the moment the fake
// starts answering a termination time to the notice on Notifier.C, over
// -alibaba.trials trials spread over the polling cycle, at Interval 1 s
// (the default) and 100 ms, on an instance that allows the security
// hardening mode only (see spotpolltest.Latency).
//
//	go test -run XXX -bench DetectionLatency -benchtime 1x ./alibaba
func BenchmarkDetectionLatency(b *testing.B) {
	for _, interval := range []time.Duration{alibaba.DefaultInterval, 100 * time.Millisecond} {
		b.Run("interval="+interval.String(), func(b *testing.B) {
			for b.Loop() {
				timing.Report(b, spotpolltest.Latency(b, interval, *trials, *workers, alibabatest.PathTerminationTime, 5*time.Minute,
					func() (spotpolltest.Fake, *termsig.Notifier) {
						srv := alibabatest.NewServer()
						srv.SetTokensRequired(true)
						return srv, quiet.New(alibaba.New(alibaba.Config{Endpoint: srv.URL, Interval: interval, Logger: slog.New(slog.DiscardHandler)}))
					}))
			}
		})
	}
}

// BenchmarkIdleRequests counts the requests a source makes at the defaults
// against a fake with nothing scheduled, over one real minute.
//
//	go test -run XXX -bench IdleRequests -benchtime 1x ./alibaba
func BenchmarkIdleRequests(b *testing.B) {
	for b.Loop() {
		srv := alibabatest.NewServer()
		n := quiet.New(alibaba.New(alibaba.Config{Endpoint: srv.URL, Logger: slog.New(slog.DiscardHandler)}))
		<-time.After(time.Minute)
		n.Stop()
		b.ReportMetric(float64(srv.Requests(alibabatest.PathTerminationTime)), "polls/min")
		b.ReportMetric(float64(srv.Requests(alibabatest.KeyToken)), "tokens/min")
		srv.Close()
	}
}

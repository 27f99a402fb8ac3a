package tencent_test

import (
	"flag"
	"log/slog"
	"testing"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/spotpoll/spotpolltest"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/tencent"
	"github.com/termsig/termsig/tencent/tencenttest"
)

var (
	trials  = flag.Int("tencent.trials", 200, "trials per latency benchmark")
	workers = flag.Int("tencent.workers", 10, "fake and source pairs that run trials side by side")
)

// BenchmarkDetectionLatency measures the time from the moment the fake
// starts answering a termination time to the notice on Notifier.C, over
// -tencent.trials trials spread over the polling cycle, at Interval 1 s
// (the default) and 100 ms (see spotpolltest.Latency).
//
//	go test -run XXX -bench DetectionLatency -benchtime 1x ./tencent
func BenchmarkDetectionLatency(b *testing.B) {
	for _, interval := range []time.Duration{tencent.DefaultInterval, 100 * time.Millisecond} {
		b.Run("interval="+interval.String(), func(b *testing.B) {
			for b.Loop() {
				timing.Report(b, spotpolltest.Latency(b, interval, *trials, *workers, tencenttest.PathTerminationTime, 2*time.Minute,
					func() (spotpolltest.Fake, *termsig.Notifier) {
						srv := tencenttest.NewServer()
						return srv, quiet.New(tencent.New(tencent.Config{Endpoint: srv.URL, Interval: interval, Logger: slog.New(slog.DiscardHandler)}))
					}))
			}
		})
	}
}

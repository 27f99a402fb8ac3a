package gcemeta_test

import (
	"context"
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/termsigtest"
)

var (
	idleFor = flag.Duration("gcemeta.idle", 0,
		"BenchmarkIdleRequestRate: run at the default WaitTimeout for this long (real time, e.g. 185s); "+
			"0 measures with a 2 s WaitTimeout and scales to the default")
	spinFor = flag.Duration("gcemeta.spin", 10*time.Second,
		"BenchmarkIgnoreWaitRequestRate: how long to run against a server that ignores wait_for_change")
)

var watched = []string{preempted, maintenance, upcoming}

// BenchmarkFlipLatency measures, over 200 trials per iteration, the time
// from a change of a value in the fake (while the source waits on its long
// poll) to the notice's receipt on Notifier.C: the long poll's answer over
// loopback HTTP, parsing, the source's send and the Notifier's forwarding.
// Each trial flips instance/maintenance-event between
// MIGRATE_ON_HOST_MAINTENANCE (Maintenance) and NONE (Cleared).
//
// MinInterval is FloorInterval (10 ms) so that the trials do not wait a second each for the
// next long poll; the latency itself does not depend on it, because each
// trial waits until the next long poll is armed before it flips.
//
//	go test -run XXX -bench FlipLatency -benchtime 1x ./gcemeta
func BenchmarkFlipLatency(b *testing.B) {
	const trials = 200
	srv := gcemetatest.NewServer()
	defer srv.Close()
	n := termsig.New(gcemeta.New(gcemeta.Config{Host: srv.Host(), MinInterval: gcemeta.FloorInterval}))
	defer n.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	armed := func(after int) func() bool {
		return func() bool { return srv.Requests(maintenance) > after && srv.Waiting(maintenance) == 1 }
	}
	values := [2]string{"MIGRATE_ON_HOST_MAINTENANCE", "NONE"}
	var lat []time.Duration
	flips := 0
	if err := srv.Await(ctx, armed(0)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for range trials {
			before := srv.Requests(maintenance)
			start := time.Now()
			srv.Set(maintenance, values[flips%2])
			flips++
			select {
			case <-n.C():
				lat = append(lat, time.Since(start))
			case <-time.After(wait):
				b.Fatal("no notice")
			}
			if err := srv.Await(ctx, armed(before)); err != nil {
				b.Fatal(err)
			}
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(len(lat)), "trials")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
}

// BenchmarkIdleRequestRate measures the requests per minute per key when
// nothing changes, at the default WaitTimeout (60 s) and MinInterval.
//
// By default it runs long polls with a 2 s timeout for 4 cycles, counts
// the requests per key after the first long poll started, and scales the
// rate to the default timeout (requests per cycle × cycles per minute at
// 60 s). With -gcemeta.idle=D it instead runs at the real defaults for D
// and reports the rate after the first long poll started
// ("req/min/key"), the requests per key in the whole window, start
// included, and that count per minute of the window:
//
//	go test -run XXX -bench IdleRequestRate -benchtime 1x ./gcemeta
//	go test -run XXX -bench IdleRequestRate -benchtime 1x ./gcemeta -args -gcemeta.idle=185s
func BenchmarkIdleRequestRate(b *testing.B) {
	for b.Loop() {
		srv := gcemetatest.NewServer()
		cfg := gcemeta.Config{Host: srv.Host()}
		window := *idleFor
		scaled := window == 0
		const cycles = 4
		if scaled {
			cfg.WaitTimeout = 2 * time.Second
		}
		n := termsig.New(gcemeta.New(cfg))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		started := time.Now()
		// The first read and the first long poll of every key.
		err := srv.Await(ctx, func() bool {
			for _, k := range watched {
				if srv.Waiting(k) != 1 {
					return false
				}
			}
			return true
		})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		polling := time.Now()
		base := map[string]int{}
		for _, k := range watched {
			base[k] = srv.Requests(k)
		}
		if scaled {
			// A quarter cycle more, so that the last of the cycles'
			// requests is in.
			<-time.After(cycles*cfg.WaitTimeout + cfg.WaitTimeout/4)
		} else {
			<-time.After(window - time.Since(started))
		}
		elapsed := time.Since(polling)
		worst, total := 0.0, 0
		for _, k := range watched {
			r := srv.Requests(k)
			total = max(total, r)
			var perMin float64
			if scaled {
				perCycle := float64(r-base[k]) / cycles
				perMin = perCycle * time.Minute.Seconds() / gcemeta.DefaultWaitTimeout.Seconds()
			} else {
				perMin = float64(r-base[k]) / elapsed.Minutes()
			}
			worst = max(worst, perMin)
		}
		n.Stop()
		srv.Close()
		b.ReportMetric(worst, "req/min/key")
		if !scaled {
			b.ReportMetric(float64(total), "req/key-in-window")
			b.ReportMetric(float64(total)/window.Minutes(), "req/min/key-with-start")
		}
	}
}

// BenchmarkIgnoreWaitRequestRate measures the requests per minute per key
// against a server that answers every wait_for_change request at once, at
// the default MinInterval (1 s), over -gcemeta.spin of real time (10 s by
// default):
//
//	go test -run XXX -bench IgnoreWaitRequestRate -benchtime 1x ./gcemeta
func BenchmarkIgnoreWaitRequestRate(b *testing.B) {
	for b.Loop() {
		srv := gcemetatest.NewServer()
		srv.Inject(termsigtest.Fault{NoLongPoll: true})
		n := termsig.New(gcemeta.New(gcemeta.Config{Host: srv.Host()}))
		<-time.After(*spinFor)
		n.Stop()
		worst := 0
		for _, k := range watched {
			worst = max(worst, srv.Requests(k))
		}
		srv.Close()
		b.ReportMetric(float64(worst)/spinFor.Minutes(), "req/min/key")
		b.ReportMetric(float64(worst), "req/key")
	}
}

// BenchmarkSecondChange measures, over 200 trials, the time from a second
// change of instance/maintenance-event, made 10 to 100 ms after the first
// (spread evenly), to its notice on Notifier.C, at the default
// MinInterval (1 s): the first change's answer is followed by the next
// long poll at once, so MinInterval does not hold the second back. The
// pairs are 150 ms apart.
//
//	go test -run XXX -bench SecondChange -benchtime 1x ./gcemeta
func BenchmarkSecondChange(b *testing.B) {
	const trials = 200
	srv := gcemetatest.NewServer()
	defer srv.Close()
	n := termsig.New(gcemeta.New(gcemeta.Config{Host: srv.Host()}))
	defer n.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	armed := func(after int) func() bool {
		return func() bool { return srv.Requests(maintenance) > after && srv.Waiting(maintenance) == 1 }
	}
	if err := srv.Await(ctx, armed(0)); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		for i := range trials {
			// Pairs of changes, each pair after a quiet spell: at most
			// one long poll per MinInterval/10 follows a change at once.
			<-time.After(150 * time.Millisecond)
			before := srv.Requests(maintenance)
			srv.Set(maintenance, "MIGRATE_ON_HOST_MAINTENANCE")
			<-n.C()
			gap := 10*time.Millisecond + time.Duration(i)*90*time.Millisecond/trials
			<-time.After(gap) // the stimulus: the second change comes this long after the first
			start := time.Now()
			srv.Set(maintenance, "NONE")
			select {
			case <-n.C():
				lat = append(lat, time.Since(start))
			case <-time.After(wait):
				b.Fatal("no notice")
			}
			if err := srv.Await(ctx, armed(before+1)); err != nil {
				b.Fatal(err)
			}
		}
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(len(lat)), "trials")
	b.ReportMetric(ms(sum/time.Duration(len(lat))), "mean-ms")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[(len(lat)*99+99)/100-1]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

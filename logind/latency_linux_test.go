package logind_test

import (
	"context"
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/logind/logindtest"
)

var trials = flag.Int("logind.trials", 200, "trials per latency benchmark")

// BenchmarkLatency measures, over -logind.trials shutdowns announced by a
// fake logind on a real dbus-daemon:
//
//   - notice: from the fake's PrepareForShutdown (both signals emitted)
//     to the notice on Notifier.C;
//   - release: from Notifier.Release to the fake reading EOF from the
//     lock it handed out.
//
// Each trial then cancels the shutdown and waits for the new lock.
//
//	go test -run XXX -bench Latency -benchtime 1x ./logind
func BenchmarkLatency(b *testing.B) {
	for b.Loop() {
		notice, release := measure(b, *trials)
		report(b, "notice", notice)
		report(b, "release", release)
	}
}

func measure(b *testing.B, trials int) (notice, release []time.Duration) {
	bus, err := logindtest.StartBus()
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close()
	fake, err := logindtest.New(bus.Address(), logindtest.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	log := testlog.New()
	src := newSource(bus.Address(), log)
	n := termsig.Config{Logger: log.Logger()}.New(src)
	defer n.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	watcher, err := dbus.Connect(bus.Address())
	if err != nil {
		b.Fatal(err)
	}
	defer watcher.Close()
	if err := watcher.AddMatchSignal(dbus.WithMatchInterface("org.freedesktop.DBus"), dbus.WithMatchMember("NameOwnerChanged")); err != nil {
		b.Fatal(err)
	}
	sigs := make(chan *dbus.Signal, 1024)
	watcher.Signal(sigs)
	for i := range trials {
		start := time.Now()
		if err := fake.PrepareForShutdown("poweroff"); err != nil {
			b.Fatal(err)
		}
		nt := <-n.C()
		notice = append(notice, time.Since(start))
		start = time.Now()
		if err := n.Release(ctx, nt); err != nil {
			b.Fatal(err)
		}
		if err := fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return !all[i].Released.IsZero() }); err != nil {
			b.Fatal(err)
		}
		release = append(release, fake.Inhibitors()[i].Released.Sub(start))
		if err := fake.CancelShutdown("poweroff"); err != nil {
			b.Fatal(err)
		}
		if nt := <-n.C(); nt.Kind != termsig.Cleared {
			b.Fatalf("got %v, want cleared", nt)
		}
		if err := fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return len(all) == i+2 }); err != nil {
			b.Fatal(err)
		}
		// The lock came on a connection of its own, closed after the
		// call: the next trial begins once the bus is done with it, as a
		// shutdown does not come a millisecond after a relock.
		if err := waitGone(ctx, watcher, sigs, fake.Inhibitors()[i+1].Sender); err != nil {
			b.Fatal(err)
		}
	}
	return notice, release
}

// waitGone waits until the unique name has left the bus.
func waitGone(ctx context.Context, c *dbus.Conn, sigs <-chan *dbus.Signal, name string) error {
	var has bool
	if err := c.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, name).Store(&has); err != nil || !has {
		return err
	}
	for {
		select {
		case sig := <-sigs:
			if len(sig.Body) == 3 && sig.Body[0] == name && sig.Body[2] == "" {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func report(b *testing.B, name string, lat []time.Duration) {
	slices.Sort(lat)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(timing.Percentile(lat, 50)), name+"-p50-µs")
	b.ReportMetric(us(timing.Percentile(lat, 99)), name+"-p99-µs")
	b.ReportMetric(us(lat[len(lat)-1]), name+"-max-µs")
}

//go:build unix

package imds

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/termsig/termsig/imds/imdstest"
)

// BenchmarkPollCycle measures one poll cycle: one poll of each of the four
// paths, against the fake IMDS on loopback with nothing pending (three 404s
// and an empty scheduled-events list). cpu-us/op is the process's user and
// system CPU time per cycle, the fake server's share included.
func BenchmarkPollCycle(b *testing.B) {
	srv := imdstest.NewServer()
	defer srv.Close()
	cfg := Config{Endpoint: srv.URL, Interval: time.Second, AdvisoryInterval: time.Second, RequestTimeout: 2 * time.Second}.withDefaults()
	client, release := cfg.client() // the source's own, as Watch makes it
	defer release()
	ctx := context.Background()
	w := newWatcher(cfg, client, nil)
	ps := w.pollers
	poll := func() {
		for _, p := range ps {
			if res := w.poll(ctx, p); res.err != nil {
				b.Fatal(res.err)
			}
		}
	}
	poll() // token and connection
	b.ReportAllocs()
	before := cpuTime()
	for b.Loop() {
		poll()
	}
	b.ReportMetric(float64((cpuTime()-before)/time.Microsecond)/float64(b.N), "cpu-us/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

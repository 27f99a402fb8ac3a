package acpi_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"golang.org/x/sys/unix"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
	"github.com/termsig/termsig/acpi/acpitest"
)

// minTrials is the least number of presses a latency benchmark measures,
// whatever b.N is, so that its p99 means something: run the benchmarks with
//
//	go test -run XXX -bench Latency -benchtime 1x ./acpi
const minTrials = 1000

// latency measures trials of "press, then receive the notice on C" and
// reports the median, the 99th percentile and the worst case. Every press
// is a distinct press: the sources run with deduplication off
// (Tuning.DedupeWindow < 0), or the default 2 s window would swallow all but the
// first.
func latency(b *testing.B, n *termsig.Notifier, press func() error) {
	b.Helper()
	trials := max(b.N, minTrials)
	lat := make([]time.Duration, 0, trials)
	timeout := time.NewTimer(time.Hour)
	defer timeout.Stop()
	b.ResetTimer()
	for range trials {
		start := time.Now()
		if err := press(); err != nil {
			b.Fatal(err)
		}
		timeout.Reset(wait)
		select {
		case <-n.C():
		case <-timeout.C:
			b.Fatal("no notice")
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(float64(sum)/float64(trials), "ns/op")
	b.ReportMetric(us(lat[len(lat)*50/100]), "p50-µs")
	b.ReportMetric(us(lat[len(lat)*99/100]), "p99-µs")
	b.ReportMetric(us(lat[len(lat)-1]), "max-µs")
	b.ReportMetric(float64(trials), "trials")
}

// BenchmarkAcpidLatency: the fake acpid writes a line on its UNIX socket;
// the notice arrives on Notifier.C.
func BenchmarkAcpidLatency(b *testing.B) {
	fake, err := acpitest.NewAcpid()
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	n := termsig.New(acpi.New(acpi.Tune(acpi.Config{Transports: acpi.Acpid, AcpidSocket: fake.Path()}, acpi.Tuning{DedupeWindow: -1})))
	defer n.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := fake.WaitClients(ctx, 1); err != nil {
		b.Fatal(err)
	}
	latency(b, n, func() error {
		_, err := fake.Send(acpitest.PowerButtonLine)
		return err
	})
}

// BenchmarkInputLatency: a press written to a fake input device (a FIFO);
// the notice arrives on Notifier.C.
func BenchmarkInputLatency(b *testing.B) {
	in, err := acpitest.NewInput()
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	dev, err := in.AddDevice("Power Button", acpitest.KeyPower)
	if err != nil {
		b.Fatal(err)
	}
	n := termsig.New(acpi.New(acpi.Tune(acpi.Config{Transports: acpi.Input, InputDevices: in.Devices(), Root: in.Root()}, acpi.Tuning{DedupeWindow: -1})))
	defer n.Stop()
	latency(b, n, dev.PressPowerButton)
}

// BenchmarkNetlinkLatency: an acpi_event message unicast through the
// kernel to the source's netlink socket; the notice arrives on
// Notifier.C. It needs CAP_NET_ADMIN and the acpi_event family.
func BenchmarkNetlinkLatency(b *testing.B) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		b.Fatal(err)
	}
	fam, err := c.GetFamily(acpitest.GenlFamily)
	c.Close()
	if err != nil {
		b.Skip(err)
	}
	logs := newLogRecorder()
	n := termsig.New(acpi.New(acpi.Tune(acpi.Config{Transports: acpi.Netlink, Logger: logs.logger()}, acpi.Tuning{DedupeWindow: -1})))
	defer n.Stop()
	port, err := strconv.ParseUint(attr(logs.waitFor(b, "acpi: netlink subscribed", 1), "port"), 10, 32)
	if err != nil {
		b.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: uint32(port)}
	var count uint32
	latency(b, n, func() error {
		count++
		return unix.Sendto(fd, acpitest.NetlinkMessage(fam.ID, acpitest.GenlMessage(acpitest.PowerButtonGenlEvent(count))), 0, to)
	})
}

// BenchmarkAvailable measures the check that sources.Detect makes on this
// host with the default Config.
func BenchmarkAvailable(b *testing.B) {
	src := acpi.New(acpi.Config{})
	b.ReportAllocs()
	for b.Loop() {
		src.Available()
	}
}

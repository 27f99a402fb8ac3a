package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termsig/termsig/internal/ops/opstest"
)

// BenchmarkIdle measures an idle ghrunner (run.sh listening, no job, the
// signal and imds sources at their defaults): its RSS (VmRSS, and the
// peak VmHWM) and CPU time after GHRUNNER_BENCH_IDLE (30 s) of idling,
// without the ops flags and with metrics and probes served and
// /metrics scraped every 15 s. The binary is built without -race (the
// tests' is built with it), as it would be deployed.
func BenchmarkIdle(b *testing.B) {
	idle := 30 * time.Second
	if v := os.Getenv("GHRUNNER_BENCH_IDLE"); v != "" {
		var err error
		if idle, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	bin := filepath.Join(b.TempDir(), "ghrunner")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("building ghrunner: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"ops-off", nil},
		{"metrics-scraped", []string{"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				w := newWorld(b, 0)
				p := w.startBin(bin, append([]string{"-imds-interval", "0"}, tc.flags...)...)
				w.onlineRunner("spot-1")
				p.stdout.await(b, func(line string) bool { return contains(line, "Listening for Jobs") })
				addr := ""
				if tc.flags != nil {
					addr, _ = p.logLine("serving metrics and health probes")["addr"].(string)
				}
				cpu0 := cpuTime(b, p.cmd.Process.Pid)
				end := time.Now().Add(idle)
				for time.Now().Before(end) {
					if addr != "" {
						opstest.Scrape(b, addr)
					}
					time.Sleep(min(15*time.Second, time.Until(end))) // the idle window itself
				}
				cpu := cpuTime(b, p.cmd.Process.Pid) - cpu0
				rss, hwm := memory(b, p.cmd.Process.Pid)
				b.ReportMetric(rss, "VmRSS-MiB")
				b.ReportMetric(hwm, "VmHWM-MiB")
				b.ReportMetric(cpu.Seconds()*float64(time.Hour)/float64(idle), "CPU-s/hour")
				p.signal(syscall.SIGTERM)
				p.exit()
			}
		})
	}
}

// cpuTime is the CPU time of every thread of process pid so far, from
// the first field of /proc/PID/task/*/schedstat.
func cpuTime(b *testing.B, pid int) time.Duration {
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(files) == 0 {
		b.Fatalf("no schedstat for %d: %v", pid, err)
	}
	var sum time.Duration
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread is gone
		}
		if fields := strings.Fields(string(data)); len(fields) > 0 {
			ns, _ := strconv.ParseInt(fields[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// memory is VmRSS and VmHWM of process pid, in MiB.
func memory(b *testing.B, pid int) (rss, hwm float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "VmRSS":
			rss = kb / 1024
		case "VmHWM":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

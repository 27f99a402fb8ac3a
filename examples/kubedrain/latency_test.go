package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/timing"
)

// latencyPods is how many pods each trial of BenchmarkFlipToDrain
// evicts, besides a DaemonSet pod and a mirror pod it leaves.
const latencyPods = 20

// BenchmarkFlipToDrain measures, against a real kube-apiserver, how long
// after IMDS posts a spot interruption the node is cordoned and every
// eviction is issued, as seen by a watch on the API server. Each
// iteration is one trial with a fresh kubedrain process that has polled
// IMDS at least once. The figures go into README.md:
//
//	go test -run '^$' -bench FlipToDrain -benchtime 20x
//
// Sub-benchmarks run kubedrain with IMDS polled at its default interval
// (1 s), which decides most of the time, and at 100 ms, which shows
// kubedrain's own part better; own-* is from the moment the imds source
// saw the notice to the cordon.
func BenchmarkFlipToDrain(b *testing.B) {
	c, kubeconfig := setupCluster(b)
	srv := imdstest.NewServer()
	defer srv.Close()
	for _, interval := range []time.Duration{time.Second, 100 * time.Millisecond} {
		b.Run("imds-interval="+interval.String(), func(b *testing.B) {
			var cordoned, evicted, own []time.Duration
			for i := range b.N {
				co, ev, ow := flipTrial(b, c.Client, kubeconfig, srv, interval, fmt.Sprintf("%s-%d", interval, i))
				cordoned, evicted, own = append(cordoned, co), append(evicted, ev), append(own, ow)
			}
			report(b, "cordon", cordoned)
			report(b, "evict", evicted)
			report(b, "own", own)
		})
	}
}

// flipTrial runs one trial: pods on the node, kubedrain watching, the
// interruption posted; then it puts everything back.
func flipTrial(b *testing.B, client kubernetes.Interface, kubeconfig string, srv *imdstest.Server, interval time.Duration, id string) (cordoned, evicted, own time.Duration) {
	var names []string
	id = strings.NewReplacer(".", "", "ms", "m").Replace(id)
	label := func(p *corev1.Pod) { p.Labels = map[string]string{"trial": id} }
	for j := range latencyPods {
		p := newPod("work", fmt.Sprintf("p-%s-%d", id, j), ownedBy("ReplicaSet"), label)
		createRunningPod(b, client, p)
		names = append(names, "work/"+p.Name)
	}
	createRunningPod(b, client, newPod("work", "ds-"+id, ownedBy("DaemonSet"), label))
	createRunningPod(b, client, newPod("work", "mirror-"+id, label, func(p *corev1.Pod) { p.Annotations = map[string]string{mirrorAnnotation: "h"} }))
	kd := startKubedrain(b, kubeconfig, srv.URL, "--imds-interval", interval.String(), "--log-level", "info")
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	require.NoError(b, srv.AwaitRequests(ctx, imdstest.PathInstanceAction, srv.Requests(imdstest.PathInstanceAction)+1))

	// A spot interruption is posted at any moment of the polling cycle,
	// not just after a poll: this sleep sets the phase, it waits for
	// nothing.
	time.Sleep(rand.N(interval))
	flip := time.Now()
	srv.SetInterruption("terminate", flip.Add(2*time.Minute))
	untilNode(b, client, "cordoned", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	cordoned = time.Since(flip)
	untilPods(b, client, "work", "evicted", terminating(names...))
	evicted = time.Since(flip)
	line := kd.await(b, "kubedrain: drain")
	observed, err := time.Parse(time.RFC3339Nano, line["notice"].(map[string]any)["observed"].(string))
	require.NoError(b, err)
	own = flip.Add(cordoned).Sub(observed)

	kd.stop(b)
	srv.ClearInterruption()
	resetNode(b, client, id)
	return cordoned, evicted, own
}

// resetNode removes kubedrain's marks from the node and the trial's pods.
func resetNode(b *testing.B, client kubernetes.Interface, id string) {
	ctx := b.Context()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null},"labels":{%q:null}},"spec":{"unschedulable":null,"taints":null}}`, AnnotationKey, ExcludeLabel)
	_, err := client.CoreV1().Nodes().Patch(ctx, testNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(b, err)
	err = client.CoreV1().Pods("work").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))},
		metav1.ListOptions{LabelSelector: "trial=" + id})
	require.NoError(b, err)
}

// report reports the mean, p50, p99 and max of lat in milliseconds.
func report(b *testing.B, name string, lat []time.Duration) {
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(sum/time.Duration(len(lat))), name+"-mean-ms")
	b.ReportMetric(ms(timing.Percentile(lat, 50)), name+"-p50-ms")
	b.ReportMetric(ms(timing.Percentile(lat, 99)), name+"-p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), name+"-max-ms")
}

// BenchmarkIdle measures an idle kubedrain, IMDS polled at its defaults,
// against a real kube-apiserver: its resident memory and CPU time over a
// window of -idle (30 s by default) after a first settling period. Side
// by side, in one run: without a metrics listener; with one that nothing
// scrapes; and with one scraped every -scrape (15 s, Prometheus' common
// interval) as Prometheus would, the whole exposition read:
//
//	go test -run '^$' -bench Idle -benchtime 1x -idle 2m
func BenchmarkIdle(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads /proc")
	}
	_, kubeconfig := setupCluster(b)
	srv := imdstest.NewServer()
	defer srv.Close()
	for _, bc := range []struct {
		name    string
		metrics bool
		scrape  bool
	}{
		{"metrics=off", false, false},
		{"metrics=on,unscraped", true, false},
		{"metrics=on,scraped", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var args []string
			if bc.metrics {
				args = []string{"--metrics-bind-address", "127.0.0.1:0"}
			}
			for range b.N {
				kd := startKubedrain(b, kubeconfig, srv.URL, append(args, "--log-level", "info")...)
				pid := kd.cmd.Process.Pid
				var addr string
				if bc.scrape {
					addr = addrOf(b, kd, "metrics")
				}
				stop, scrapes := make(chan struct{}), make(chan int, 1)
				go func() {
					n := 0
					defer func() { scrapes <- n }()
					if !bc.scrape {
						<-stop
						return
					}
					t := time.NewTicker(*scrapeEvery)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							if code, _ := httpGet(addr, "/metrics"); code == 200 {
								n++
							}
						}
					}
				}()
				// Measurement windows: these sleeps wait for time to
				// pass, not for an event.
				time.Sleep(5 * time.Second)
				cpu0 := cpuTime(b, pid)
				before := srv.Requests(imdstest.PathInstanceAction)
				time.Sleep(*idleWindow)
				cpu := cpuTime(b, pid) - cpu0
				polls := srv.Requests(imdstest.PathInstanceAction) - before
				all, anon := rss(b, pid)
				b.ReportMetric(float64(all)/(1<<20), "rss-MiB")
				b.ReportMetric(float64(anon)/(1<<20), "rss-anon-MiB")
				close(stop)
				b.ReportMetric(float64(<-scrapes), "scrapes")
				b.ReportMetric(cpu.Seconds()*float64(time.Hour)/float64(*idleWindow), "cpu-s/hour")
				b.ReportMetric(float64(polls)/idleWindow.Seconds(), "instance-action-polls/s")
				kd.stop(b)
			}
		})
	}
}

var (
	idleWindow  = flag.Duration("idle", 30*time.Second, "BenchmarkIdle's measurement window")
	scrapeEvery = flag.Duration("scrape", 15*time.Second, "BenchmarkIdle's interval between scrapes of the metrics")
)

// rss returns the resident set of process pid, and its anonymous part
// (the heap, stacks: what is not the binary's pages, which are clean and
// shared, and given back under memory pressure), in bytes.
func rss(b *testing.B, pid int) (all, anon int64) {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	kB := func(v string) int64 {
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		require.NoError(b, err)
		return n << 10
	}
	for _, line := range strings.Split(string(s), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			all = kB(v)
		} else if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			anon = kB(v)
		}
	}
	if all == 0 || anon == 0 {
		b.Fatalf("no VmRSS or RssAnon in /proc/%d/status", pid)
	}
	return all, anon
}

// cpuTime returns the CPU time of every thread of process pid so far,
// from the first field of /proc/PID/task/*/schedstat (nanoseconds, where
// /proc/PID/stat counts 10 ms ticks).
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
			ns, err := strconv.ParseInt(fields[0], 10, 64)
			require.NoError(b, err)
			sum += time.Duration(ns)
		}
	}
	return sum
}

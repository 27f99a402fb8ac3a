package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
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
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"unschedulable":null,"taints":null}}`, AnnotationKey)
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
// window of -idle (30 s by default) after a first settling period:
//
//	go test -run '^$' -bench Idle -benchtime 1x
func BenchmarkIdle(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads /proc")
	}
	_, kubeconfig := setupCluster(b)
	srv := imdstest.NewServer()
	defer srv.Close()
	for range b.N {
		kd := startKubedrain(b, kubeconfig, srv.URL, "--log-level", "info")
		pid := kd.cmd.Process.Pid
		// Measurement windows: these sleeps wait for time to pass, not
		// for an event.
		time.Sleep(5 * time.Second)
		cpu0 := cpuTime(b, pid)
		before := srv.Requests(imdstest.PathInstanceAction)
		time.Sleep(*idleWindow)
		cpu := cpuTime(b, pid) - cpu0
		polls := srv.Requests(imdstest.PathInstanceAction) - before
		b.ReportMetric(float64(rss(b, pid))/(1<<20), "rss-MiB")
		b.ReportMetric(cpu.Seconds()*float64(time.Hour)/float64(*idleWindow), "cpu-s/hour")
		b.ReportMetric(float64(polls)/idleWindow.Seconds(), "instance-action-polls/s")
		kd.stop(b)
	}
}

var idleWindow = flag.Duration("idle", 30*time.Second, "BenchmarkIdle's measurement window")

// rss returns the resident set of process pid, in bytes.
func rss(b *testing.B, pid int) int64 {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	for _, line := range strings.Split(string(s), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(b, err)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// cpuTime returns the user and system time of process pid so far.
func cpuTime(b *testing.B, pid int) time.Duration {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(s[strings.LastIndexByte(string(s), ')')+2:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	require.NoError(b, errors.Join(err1, err2))
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

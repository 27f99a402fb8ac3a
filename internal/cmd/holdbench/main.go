// Command holdbench measures the asg source against asgtest and imdstest on
// loopback, with no added latency: how long after IMDS shows a scale-in the
// held notice comes, how long after Release the API has the completion,
// and whether a long hold keeps its heartbeats. Run it on an idle machine:
//
//	go run ./internal/cmd/holdbench
//
// Its figures are in asg/README.md and BENCHMARKS.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/asg"
	"github.com/termsig/termsig/asg/asgtest"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
)

func main() {
	rounds := flag.Int("rounds", 100, "scale-ins to time")
	heartbeat := flag.Duration("heartbeat", 2*time.Second, "the hook's heartbeat timeout for the long hold")
	holds := flag.Int("holds", 10, "the long hold, in heartbeat timeouts")
	flag.Parse()
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_AUTO_SCALING"} {
		os.Unsetenv(v)
	}
	os.Setenv("AWS_CONFIG_FILE", os.DevNull)
	os.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	if err := run(*rounds, *heartbeat, *holds); err != nil {
		fmt.Fprintln(os.Stderr, "holdbench:", err)
		os.Exit(1)
	}
}

// A bench is the fakes a source runs against.
type bench struct {
	imds *imdstest.Server
	api  *asgtest.Server
	cur  string // the instance whose state IMDS shows
}

func run(rounds int, heartbeat time.Duration, holds int) error {
	b := &bench{imds: imdstest.NewServer(), api: asgtest.NewServer()}
	defer b.imds.Close()
	defer b.api.Close()
	b.imds.SetRole("bench")
	b.api.OnTargetState = func(id, state string) {
		if id == b.cur {
			b.imds.SetLifecycleState(state)
		}
	}
	b.api.AddGroup("bench", asgtest.Hook{Name: "termsig", HeartbeatTimeout: 300 * time.Second})
	var notice, api, release []time.Duration
	for i := range rounds {
		n, r, rel, err := b.round(fmt.Sprintf("i-%017x", i+1))
		if err != nil {
			return err
		}
		notice, api, release = append(notice, n), append(api, r), append(release, rel)
	}
	fmt.Printf("%d scale-ins, imds at its default Interval (%v), the API on loopback:\n", rounds, imds.DefaultInterval)
	fmt.Printf("  IMDS shows Terminated -> held notice:      %s\n", dist(notice))
	fmt.Printf("    of which the API (instances, hooks, heartbeat, activities): %s\n", dist(api))
	fmt.Printf("  Release -> CompleteLifecycleAction received: %s\n", dist(release))
	return b.hold(heartbeat, holds)
}

// round times one scale-in of instance id.
func (b *bench) round(id string) (notice, api, release time.Duration, err error) {
	b.api.AddInstance(id, "bench")
	b.cur = id
	b.imds.SetLifecycleState("InService")
	src := asg.New(asg.Config{InstanceID: id, IMDS: imds.Config{Endpoint: b.imds.URL}, Endpoint: b.api.URL,
		Logger: slog.New(slog.DiscardHandler)})
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(src)
	defer n.Stop()
	<-n.Ready()
	// Let the source have its first look at the group, as it has on an
	// instance long in service.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.api.AwaitCalls(ctx, "DescribeLifecycleHooks", countCalls(b.api, "DescribeLifecycleHooks")+1); err != nil {
		return 0, 0, 0, err
	}
	// A scale-in comes at any moment of the poll's cycle.
	time.Sleep(rand.N(imds.DefaultInterval))
	start := time.Now()
	if err := b.api.ScaleIn(id); err != nil {
		return 0, 0, 0, err
	}
	var nt termsig.Notice
	select {
	case nt = <-n.C():
	case <-ctx.Done():
		return 0, 0, 0, fmt.Errorf("no notice for %s", id)
	}
	got := time.Now()
	if !nt.Held {
		return 0, 0, 0, fmt.Errorf("the notice for %s is not held: %v", id, nt)
	}
	before := time.Now()
	if err := n.Release(ctx, nt); err != nil {
		return 0, 0, 0, err
	}
	for _, c := range b.api.Calls() {
		if c.Action == "CompleteLifecycleAction" && c.InstanceID == id && c.Err == "" {
			return got.Sub(start), got.Sub(nt.Observed), c.At.Sub(before), nil
		}
	}
	return 0, 0, 0, fmt.Errorf("no completion for %s", id)
}

// hold keeps one scale-in held for holds heartbeat timeouts and counts the
// heartbeats, the notices and the lapses.
func (b *bench) hold(heartbeat time.Duration, holds int) error {
	b.api.AddGroup("long", asgtest.Hook{Name: "long", HeartbeatTimeout: heartbeat})
	id := "i-0fffffffffffffff0"
	b.api.AddInstance(id, "long")
	b.cur = id
	b.imds.SetLifecycleState("InService")
	src := asg.New(asg.Config{InstanceID: id, IMDS: imds.Config{Endpoint: b.imds.URL}, Endpoint: b.api.URL,
		Logger: slog.New(slog.DiscardHandler)})
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(src)
	defer n.Stop()
	<-n.Ready()
	if err := b.api.ScaleIn(id); err != nil {
		return err
	}
	first := <-n.C()
	end := time.After(time.Duration(holds) * heartbeat)
	notices, last := 1, first
	for wait := true; wait; {
		select {
		case nt := <-n.C():
			notices++
			last = nt
		case <-end:
			wait = false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Release(ctx, last); err != nil {
		return err
	}
	beats, lapses := 0, 0
	for _, c := range b.api.Calls() {
		switch {
		case c.InstanceID == id && c.Action == "RecordLifecycleActionHeartbeat" && c.Err == "":
			beats++
		case c.InstanceID == id && c.Action == asgtest.ActionTimeout:
			lapses++
		}
	}
	fmt.Printf("a hold of %d × a %v heartbeat timeout: %d heartbeats, %d notices (each a new Deadline), %d lapses, held at the end: %v\n",
		holds, heartbeat, beats, notices, lapses, last.Held)
	return nil
}

func countCalls(api *asgtest.Server, action string) int {
	n := 0
	for _, c := range api.Calls() {
		if c.Action == action && c.Err == "" {
			n++
		}
	}
	return n
}

// dist returns p50 and p99 of ds.
func dist(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("p50 %v, p99 %v, max %v", at(0.5).Round(10*time.Microsecond), at(0.99).Round(10*time.Microsecond), s[len(s)-1].Round(10*time.Microsecond))
}

package termsig_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/termsigtest"
)

func ExampleNew() {
	// In a program: termsig.New(sources.Detect(sources.Config{})...).
	spot := termsigtest.NewFake("imds")
	n := termsig.New(spot)
	defer n.Stop()

	spot.Send(termsig.Notice{Kind: termsig.Rebalance, Reason: "rebalance recommendation"})
	spot.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "spot interruption: terminate"})

	for nt := range n.C() {
		if !nt.Kind.Imminent() {
			fmt.Println("advice:", nt.Kind, "-", nt.Reason)
			continue
		}
		fmt.Println("leaving:", nt.Kind, "-", nt.Reason)
		break
	}
	// Output:
	// advice: rebalance - rebalance recommendation
	// leaving: terminate - spot interruption: terminate
}

func ExampleNotifyContext() {
	// In a program: termsig.NotifyContext(ctx, signal.New()).
	src := termsigtest.NewFake("signal")
	ctx, stop := termsig.NotifyContext(context.Background(), src)
	defer stop()

	src.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "SIGTERM"})

	<-ctx.Done() // the work would watch ctx here
	if nt, ok := termsig.Cause(ctx); ok {
		fmt.Printf("stopped by %s: %s (%s)\n", nt.Source, nt.Kind, nt.Reason)
	}
	// Output: stopped by signal: terminate (SIGTERM)
}

func ExampleNotifier_Status() {
	spot := termsigtest.NewFake("imds")
	spot.Fail(fmt.Errorf("not on EC2: %w", termsig.ErrUnavailable))
	n := termsig.New(spot)
	n.Stop()
	for _, st := range n.Status() {
		fmt.Println(st.Name, st.State, st.Err)
	}
	// Output: imds unavailable not on EC2: termsig: source unavailable on this host
}

func ExampleNotice_String() {
	seen := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	fmt.Println(termsig.Notice{
		Source:   "imds",
		Kind:     termsig.Terminate,
		Reason:   "spot interruption: terminate",
		Observed: seen,
		Deadline: seen.Add(2 * time.Minute),
	})
	// Output: imds: terminate (spot interruption: terminate), deadline 2026-11-30T10:02:00Z (in 2m0s)
}

func ExampleNotice_DrainContext() {
	seen := time.Now()
	nt := termsig.Notice{Source: "imds", Kind: termsig.Terminate, Observed: seen, Deadline: seen.Add(2 * time.Minute)}

	// Hand work back within the time left, keeping 10 s in hand; 30 s if
	// the notice had no deadline.
	ctx, cancel := nt.DrainContext(context.Background(), termsig.Drain{Margin: 10 * time.Second, Fallback: 30 * time.Second})
	defer cancel()
	if ctx.Err() != nil {
		fmt.Println("no time left to drain") // less than 10 s to the deadline
		return
	}
	end, _ := ctx.Deadline()
	fmt.Println("drain for", end.Sub(seen))
	// Output: drain for 1m50s
}

func ExampleNotifier_Ready() {
	spot := termsigtest.NewFake("imds")
	n := termsig.New(spot)
	defer n.Stop()

	// Take no work before every source has had its first look: a spot
	// instance may already be under notice.
	select {
	case <-n.Ready():
		fmt.Println("ready: claiming work")
	case <-time.After(5 * time.Second):
		fmt.Println("sources slow to answer: claiming work anyway")
	}
	// Output: ready: claiming work
}

func ExampleNotice_MarshalJSON() {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	b, _ := json.Marshal(termsig.Notice{
		Source: "imds", Kind: termsig.Terminate, Event: "spot/instance-action",
		Reason: "spot interruption: terminate", Observed: at, Deadline: at.Add(2 * time.Minute),
	})
	fmt.Println(string(b))
	// Output: {"source":"imds","kind":"terminate","event":"spot/instance-action","reason":"spot interruption: terminate","deadline":"2026-11-30T10:02:00Z","observed":"2026-11-30T10:00:00Z"}
}

func ExampleNotifier_Release() {
	lock := termsigtest.NewFake("logind") // stands for a source that holds the shutdown
	n := termsig.New(lock)
	defer n.Stop()
	lock.Send(termsig.Notice{Kind: termsig.Terminate, Event: "shutdown/poweroff"})

	nt := <-n.C()
	// ... hand the work back, unregister ...

	// A release may retry over the network (azure's acknowledgement)
	// until its context ends: bound it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.Release(ctx, nt); err != nil {
		fmt.Println("release:", err)
	}
	fmt.Println("released:", lock.Released()[0].Event)
	// Output: released: shutdown/poweroff
}

// Command bench runs termsig's side-by-side benchmark, in one process and
// one run, and prints one markdown table (see BENCHMARKS.md):
//
//   - termsig's imds source at its defaults and in fast mode, against
//     fixed-interval pollers built on the AWS SDK's imds client, every 2 s
//     (the cadence of the reference handler's monitor) and every 5 s (AWS's
//     advice): the time from a spot interruption to its detection, with
//     the interruptions spread evenly over each poller's cycle;
//   - termsig's gcemeta source against Client.SubscribeWithContext of
//     cloud.google.com/go/compute/metadata on the same fake metadata
//     server: single changes, back-to-back changes, a server that ignores
//     wait_for_change;
//   - the requests per minute of every client when nothing happens;
//   - the CPU and memory of examples/notices at idle, alone.
//
// The latency rows run side by side, so that machine noise hits every
// client alike. Every fake is a real HTTP server on loopback.
//
//	go run ./internal/cmd/bench          # about six minutes
//	go run ./internal/cmd/bench -quick   # a smoke run of about a minute
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"
)

// serveEnv, set in the environment, makes the command a fake IMDS in a
// process of its own for the examples/notices measurement (see serveIMDS):
// the bench starts itself again with it.
const serveEnv = "TERMSIG_BENCH_SERVE_IMDS"

// options are what the flags set.
type options struct {
	trials  int           // trials per latency row
	lane    time.Duration // the wall time the IMDS latency rows aim at
	handler time.Duration // the period of the SDK poller that stands for the reference handler
	advised time.Duration // the period of the SDK poller at AWS's advice
	spin    time.Duration // how long the clients run against a server that ignores wait_for_change
	idle    time.Duration // how long examples/notices's CPU is measured
	warmup  time.Duration // how long examples/notices runs before that
	notify  string        // a prebuilt examples/notices; empty: build it
	quick   bool          // quickRun's defaults
}

// fullRun and quickRun are the defaults of the flags without and with
// -quick.
var (
	fullRun = options{trials: 200, lane: 150 * time.Second, handler: 2 * time.Second, advised: 5 * time.Second,
		spin: 20 * time.Second, idle: 120 * time.Second, warmup: 5 * time.Second}
	quickRun = options{trials: 20, lane: 25 * time.Second, handler: 2 * time.Second, advised: 5 * time.Second,
		spin: 5 * time.Second, idle: 15 * time.Second, warmup: 3 * time.Second}
)

func main() {
	if name := os.Getenv(referenceEnv); name != "" {
		if err := runReference(name); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if os.Getenv(serveEnv) != "" {
		if err := serveIMDS(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench: fake IMDS:", err)
			os.Exit(1)
		}
		return
	}
	o, err := parseFlags(os.Args[0], os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

// parseFlags reads the flags in args, with the defaults of quickRun if
// -quick is among them and those of fullRun otherwise.
func parseFlags(name string, args []string, errOut io.Writer) (options, error) {
	o, err := parseWith(name, args, fullRun, errOut)
	if err != nil || !o.quick {
		return o, err
	}
	return parseWith(name, args, quickRun, errOut)
}

// parseWith reads the flags in args with the defaults def.
func parseWith(name string, args []string, def options, errOut io.Writer) (options, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	o := def
	fs.IntVar(&o.trials, "trials", def.trials, "trials per latency row (at least 100 gives a p99 worth the name)")
	fs.DurationVar(&o.lane, "lane", def.lane, "the wall time the IMDS latency rows aim at: each poller gets enough workers to finish its trials in it")
	fs.DurationVar(&o.handler, "handler-period", def.handler, "the period of the AWS SDK poller that stands for the reference handler's monitor")
	fs.DurationVar(&o.advised, "advised-period", def.advised, "the period of the AWS SDK poller at AWS's advice")
	fs.DurationVar(&o.spin, "spin", def.spin, "how long the GCE clients run against a server that ignores wait_for_change")
	fs.DurationVar(&o.idle, "idle", def.idle, "how long examples/notices's idle CPU is measured")
	fs.DurationVar(&o.warmup, "warmup", def.warmup, "how long examples/notices runs before its CPU is measured")
	fs.StringVar(&o.notify, "notify", "", "a prebuilt examples/notices binary; empty: build it with the go command")
	fs.BoolVar(&o.quick, "quick", false, fmt.Sprintf("a smoke run of about a minute: defaults -trials %d -lane %v -spin %v -idle %v -warmup %v",
		quickRun.trials, quickRun.lane, quickRun.spin, quickRun.idle, quickRun.warmup))
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments: %q", fs.Args())
		fmt.Fprintln(errOut, err)
		return o, err
	}
	return o, nil
}

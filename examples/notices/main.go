// Command notify prints every termination notice that the sources detected
// on this host report, until the first imminent one; then it shows the
// time it would have to drain, and exits.
//
//	go run ./examples/notices
//
// Press Ctrl-C, or send it SIGTERM or SIGHUP (kill -HUP <pid>), to see
// notices; on a cloud VM, the cloud's own notices show up as well.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/sources"
)

func main() {
	verbose := flag.Bool("v", false, "log what the sources do")
	margin := flag.Duration("margin", 5*time.Second, "time kept before the deadline")
	fallback := flag.Duration("fallback", 10*time.Second, "time to drain when a notice has no deadline")
	flag.Parse()

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	n := termsig.Config{Logger: log}.New(sources.Detect(sources.Config{Logger: log})...)
	defer n.Stop()

	fmt.Printf("pid %d: watching", os.Getpid())
	for _, st := range n.Status() {
		fmt.Printf(" %s", st.Name)
	}
	fmt.Println("; press Ctrl-C to stop")

	ready := n.Ready()
	for {
		select {
		case <-ready:
			fmt.Println("every source has had its first look")
			ready = nil
		case nt := <-n.C():
			fmt.Println(nt)
			if nt.Kind.Imminent() {
				drain(nt, *margin, *fallback)
				return
			}
		}
	}
}

// drain stands for a program's clean-up: it gets a context that ends
// margin before the notice's deadline (or fallback after the notice, when
// the deadline is unknown), whatever cancelled the program's own context.
func drain(nt termsig.Notice, margin, fallback time.Duration) {
	ctx, cancel := nt.DrainContext(context.Background(), termsig.Drain{Margin: margin, Fallback: fallback})
	defer cancel()
	end, _ := ctx.Deadline()
	if ctx.Err() != nil {
		fmt.Printf("imminent: no time left to drain (the deadline is less than %v away), exit now\n", margin)
		return
	}
	fmt.Printf("imminent: would drain until %s (%v from now), then exit\n", end.Format(time.RFC3339), time.Until(end).Round(time.Millisecond))
}

// Command notify prints every termination notice that the sources detected
// on this host report, until the first imminent one, then exits.
//
//	go run ./examples/notify
//
// Press Ctrl-C, or send it SIGTERM or SIGHUP (kill -HUP <pid>), to see
// notices; on a cloud VM, the cloud's own notices show up as well.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/sources"
)

func main() {
	verbose := flag.Bool("v", false, "log what the sources do")
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

	for nt := range n.C() {
		fmt.Println(nt)
		if nt.Kind.Imminent() {
			fmt.Println("imminent: exiting")
			return
		}
	}
}

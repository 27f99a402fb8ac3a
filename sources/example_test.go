package sources_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/sources"
)

// A program that says, before it starts work, whether the metadata
// service answers: here a fake IMDS with a spot interruption posted.
func ExampleFirstLook() {
	srv := imdstest.NewServer()
	defer srv.Close()
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))

	cfg := sources.Config{IMDS: imds.Config{Endpoint: srv.URL, Logger: slog.New(slog.DiscardHandler)}}
	srcs, err := sources.ByName(cfg, "imds")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, l := range sources.FirstLook(ctx, srcs...) {
		fmt.Println(l.Name, "ready:", l.Ready, "error:", l.Err)
		for _, nt := range l.Notices {
			fmt.Println(nt.Kind, nt.Reason)
		}
	}
	// Output:
	// imds ready: true error: <nil>
	// terminate spot interruption: terminate
}

package registry_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/termsig/termsig/examples/registry"
)

// A runner's life against a registry served by httptest: register, take a
// job, report how it went.
func Example() {
	dir, err := os.MkdirTemp("", "registry-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := registry.NewServer(filepath.Join(dir, "registry.json"), &registry.Config{AdminToken: "admin-secret", JoinToken: "join-secret"})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	ctx := context.Background()
	c := registry.NewClient(ts.URL, ts.Client())
	admin := c.WithToken("admin-secret")

	// Registering takes the join token, given to the runners.
	runner, err := c.WithToken("join-secret").Register(ctx, "ci-1", []string{"linux"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("registered", runner.ID, runner.Name, runner.Labels)
	c = c.WithToken(runner.Token) // the runner's own requests take its token

	queued, err := admin.Enqueue(ctx, "echo hello")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("enqueued", queued.ID, queued.State)

	job, err := c.Claim(ctx, runner.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("claimed", job.ID, job.State, "attempt", job.Attempts, "by", job.RunnerID)

	zero := 0
	done, err := c.Report(ctx, job.ID, registry.Result{
		RunnerID: runner.ID, State: registry.JobSucceeded, ExitCode: &zero, Output: "hello\n",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("reported %s %s exit %d output %q\n", done.ID, done.State, *done.ExitCode, done.Output)

	next, err := c.Claim(ctx, runner.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next job:", next)

	// Output:
	// registered r-1 ci-1 [linux]
	// enqueued j-1 queued
	// claimed j-1 running attempt 1 by r-1
	// reported j-1 succeeded exit 0 output "hello\n"
	// next job: <nil>
}

// A runner that is told its machine is going away reports its job
// interrupted: the job goes back to the queue for another runner.
func ExampleClient_Report_interrupted() {
	dir, err := os.MkdirTemp("", "registry-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := registry.NewServer(filepath.Join(dir, "registry.json"), &registry.Config{AdminToken: "admin-secret", JoinToken: "join-secret"})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	ctx := context.Background()
	c := registry.NewClient(ts.URL, ts.Client())
	join := c.WithToken("join-secret")
	spot, _ := join.Register(ctx, "spot-1", nil)
	other, _ := join.Register(ctx, "on-demand-1", nil)
	c.WithToken("admin-secret").Enqueue(ctx, "make test")
	job, _ := c.WithToken(spot.Token).Claim(ctx, spot.ID)

	requeued, err := c.WithToken(spot.Token).Report(ctx, job.ID, registry.Result{
		RunnerID: spot.ID, State: registry.JobInterrupted, Reason: "spot interruption",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(requeued.ID, requeued.State, "after", requeued.History[0].State, "attempt by", requeued.History[0].RunnerID)
	c.WithToken(spot.Token).Remove(ctx, spot.ID)

	again, _ := c.WithToken(other.Token).Claim(ctx, other.ID)
	fmt.Println(again.ID, again.State, "attempt", again.Attempts, "by", again.RunnerID)

	// Output:
	// j-1 queued after interrupted attempt by r-1
	// j-1 running attempt 2 by r-2
}

//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/examples/registry"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/signal"
)

// The demo's script: jobs to queue, when the fake IMDS announces the spot
// interruption, and how far ahead its deadline is.
var (
	demoJobs = []string{
		"echo compiling; sleep 1",
		"echo unit tests; sleep 1",
		"echo integration tests; sleep 30",
		"echo packaging; sleep 1",
	}
	demoLongJob     = "j-3"           // the interruption comes while it runs
	demoNoticeAfter = 1 * time.Second // of the long job running
	demoDeadline    = 10 * time.Second
)

// demoDeadlineFrom is the deadline of an interruption announced at now:
// demoDeadline later, rounded up to the second (IMDS's times are whole
// seconds), so that it is never less than demoDeadline away.
func demoDeadlineFrom(now time.Time) time.Time {
	d := now.Add(demoDeadline)
	if t := d.Truncate(time.Second); t.Before(d) {
		return t.Add(time.Second)
	}
	return d
}

// runDemo runs the runner against an embedded registry and a fake IMDS on
// loopback: no cloud and no setup. The fake announces a spot interruption
// while the long job runs; the runner drains, re-queues it, unregisters and
// exits. The registry's state is printed at the end.
func runDemo(tl *timeline, cfg config, srv *ops.Server) int {
	dir, err := os.MkdirTemp("", "termsig-demo-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return exitStartup
	}
	defer os.RemoveAll(dir)
	// The demo makes its own tokens: the operator's, which queues and
	// reads jobs, and the runner's join token, which registers.
	admin, join := rand.Text(), rand.Text()
	url, stopRegistry, err := startDemoRegistry(filepath.Join(dir, "registry.json"), admin, join)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return exitStartup
	}
	defer stopRegistry()
	client := registry.NewClient(url, nil)
	cfg.service = url
	cfg.joinToken = secret(join)
	cfg.statePath = filepath.Join(dir, "runner-state.json")
	fake := imdstest.NewServer()
	defer fake.Close()
	fmt.Fprintf(os.Stderr, "demo: registry on %s with %d jobs queued; fake IMDS on %s\n", url, len(demoJobs), fake.URL)
	fmt.Fprintf(os.Stderr, "demo: once job %s has run for %v, the fake IMDS announces a spot interruption with its deadline %v later\n"+
		"demo: (rounded up to the second, as IMDS gives it); the runner sees it at its next poll, at most a second later\n\n", demoLongJob, demoNoticeAfter, demoDeadline)

	stopAnnouncer := announceWhenRunning(client.WithToken(admin), fake, tl)
	defer stopAnnouncer()
	code := runDemoRunner(tl, cfg, client, fake.URL, srv)

	fmt.Fprintln(os.Stderr)
	if err := printState(os.Stderr, client.WithToken(admin)); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
	}
	fmt.Fprintf(os.Stderr, "\nrunner exit status %d\n", code)
	return code
}

// startDemoRegistry serves a registry with its state in statePath, the
// admin token admin and the join token join on a loopback port, queues the
// demo's jobs, and returns its URL and a function that stops it.
func startDemoRegistry(statePath, admin, join string) (url string, stop func(), err error) {
	reg, err := registry.NewServer(statePath, &registry.Config{AdminToken: admin, JoinToken: join})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: reg}
	go hs.Serve(ln)
	url = "http://" + ln.Addr().String()
	client := registry.NewClient(url, nil).WithToken(admin)
	for _, c := range demoJobs {
		if _, err := client.Enqueue(context.Background(), c); err != nil {
			hs.Close()
			return "", nil, err
		}
	}
	return url, func() { hs.Close() }, nil
}

// demoRunnerName is the demo's runner's name.
const demoRunnerName = "demo-runner"

// runDemoRunner runs the runner with the demo's settings, watching for
// signals (Ctrl-C drains it) and the fake IMDS at imdsURL; srv serves
// its metrics, probes and webhook, if the flags ask.
func runDemoRunner(tl *timeline, cfg config, client *registry.Client, imdsURL string, srv *ops.Server) int {
	cfg.name = demoRunnerName
	cfg.poll = 200 * time.Millisecond
	cfg.margin = 2 * time.Second
	srcs := []termsig.Source{
		signal.New(),
		imds.New(imds.Config{Endpoint: imdsURL}), // default intervals: what a real runner would use
	}
	n := termsig.Config{Logger: newLogger(tl)}.New(srcs...)
	defer n.Stop()
	srv.Watch(n)
	r := &runner{
		cfg:     cfg,
		svc:     registryService{client.WithToken(cfg.joinToken.reveal())},
		tl:      tl,
		notices: n.C(),
		stop:    n.Stop,
		release: n.Release,
		ready:   n.Ready(),
		notify:  func(string) {}, // not under systemd
		ops:     srv,
		m:       newRunnerMetrics(srv.Registerer()),
	}
	srv.AddReadyCheck("registration", r.registrationReady)
	return r.run()
}

// printState prints the registry's runners and jobs.
func printState(w *os.File, c *registry.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	runners, rerr := c.Runners(ctx, "")
	jobs, jerr := c.Jobs(ctx)
	if err := errors.Join(rerr, jerr); err != nil {
		return err
	}
	fmt.Fprintf(w, "registry: %d runner(s) registered\n", len(runners))
	for _, r := range runners {
		fmt.Fprintf(w, "  %s %s\n", r.ID, r.Name)
	}
	fmt.Fprintln(w, "registry: jobs")
	for _, j := range jobs {
		var hist []string
		for _, a := range j.History {
			hist = append(hist, fmt.Sprintf("attempt %d on %s: %s", a.Attempt, a.RunnerID, a.State))
		}
		fmt.Fprintf(w, "  %-4s %-11s %-34q %s\n", j.ID, j.State, j.Command, strings.Join(hist, "; "))
	}
	return nil
}

// announceWhenRunning makes the fake IMDS announce the spot interruption
// once the demo's long job has run for demoNoticeAfter, whatever the speed
// of the machine. It returns a function that stops it.
func announceWhenRunning(c *registry.Client, fake *imdstest.Server, tl *timeline) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if j, err := c.Job(ctx, demoLongJob); err != nil || j.State != "running" {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(demoNoticeAfter):
			}
			now := time.Now()
			deadline := demoDeadlineFrom(now)
			fake.SetInterruption("terminate", deadline)
			tl.Printf("[demo] the fake IMDS now answers spot/instance-action: terminate at %s (in %v)",
				deadline.UTC().Format(time.TimeOnly), deadline.Sub(now).Round(time.Millisecond))
			return
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

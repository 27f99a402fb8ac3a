//go:build linux

// Command runner is an example CI runner built on termsig: it registers
// with a CI service, runs jobs, and when the machine or the process is
// about to go away (a spot interruption, a preemption, SIGTERM from
// systemd, Ctrl-C) it stops claiming, stops its job, re-queues it,
// unregisters and exits cleanly before the deadline. A held termination
// (an Auto Scaling scale-in kept waiting by a lifecycle hook) lets the job
// finish first, and releases the hold once the runner has unregistered.
// SIGHUP makes it finish its job and re-execute itself in place, keeping
// its registration.
//
//	go run ./examples/runner -demo
//
// See README.md for the flags, the exit statuses and the systemd unit.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/examples/registry"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/internal/buildinfo"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/sources"
)

func main() { os.Exit(realMain(os.Args[1:])) }

// realMain runs the runner with the command-line arguments args and
// returns its exit status.
func realMain(args []string) int {
	// First, before any secret is read: jobs, and other processes of the
	// runner's user, must not read them in its memory or /proc files.
	if err := hideFromSameUser(); err != nil {
		fmt.Fprintln(os.Stderr, "runner: cannot hide from processes of its own user (PR_SET_DUMPABLE):", err)
	}
	cfg, fl, err := parseFlags(args)
	if err != nil {
		return exitUsage
	}
	if fl.version {
		fmt.Println(buildinfo.Line("runner"))
		return exitClean
	}
	tl := newTimeline(os.Stderr)
	log := newLogger(tl)
	var picked []termsig.Source
	if fl.demo {
		cfg.name = demoRunnerName
	} else {
		picked, err = pickSources(fl.sources, sources.Config{Logger: log, IMDS: imds.Config{Interval: fl.imdsInterval, AdvisoryInterval: fl.imdsAdvisory}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "runner:", err)
			return exitUsage
		}
	}
	// Closed last, after the Notifier has stopped: what the runner
	// handed back is posted to the webhook by then.
	srv, err := startOps(fl.ops, cfg.name, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		return exitUsage
	}
	defer srv.Close()
	if fl.demo {
		return runDemo(tl, cfg, srv)
	}

	n := termsig.Config{Logger: log}.New(picked...)
	defer n.Stop()
	srv.Watch(n)
	tl.Printf("runner %s starting (pid %d), CI service %s, sources %s", cfg.name, os.Getpid(), fl.registry, sourceNames(picked))
	tl.Printf("jobs run as %s", jobsRunAs(cfg.jobUser))
	r := &runner{
		cfg:     cfg,
		svc:     registryService{registry.NewClient(fl.registry, nil).WithToken(cfg.joinToken.reveal())},
		tl:      tl,
		notices: n.C(),
		stop:    n.Stop,
		release: n.Release,
		ready:   n.Ready(),
		notify:  sdNotify(tl),
		ops:     srv,
		m:       newRunnerMetrics(srv.Registerer()),
	}
	srv.AddReadyCheck("registration", r.registrationReady)
	return r.run()
}

// startOps starts serving the metrics, probes and webhook of the ops
// flags (--metrics-bind-address and the others), the runner's name in
// each event the webhook posts. An error names the flag.
func startOps(cfg ops.Config, name string, log *slog.Logger) (*ops.Server, error) {
	cfg.Name, cfg.Logger = "runner", log
	cfg.Webhook.Fields = map[string]string{"runner": name}
	return ops.Start(cfg)
}

// flags are the command-line settings that are not the runner's config.
type flags struct {
	registry     string
	sources      string
	imdsInterval time.Duration
	imdsAdvisory time.Duration
	demo         bool
	version      bool
	ops          ops.Config // --metrics-bind-address, --health-probe-bind-address, --webhook-*
}

// parseFlags parses the command line into the runner's config and the
// other flags, and validates the config. It prints what is wrong on
// standard error, as the flag package does. Given -version, it returns
// once the flags are parsed, the config neither checked nor complete.
func parseFlags(args []string) (config, flags, error) {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	cfg := config{resumeID: os.Getenv(runnerIDEnv)}
	var fl flags
	var labels, jobEnv, joinFile, runAs string
	fs.StringVar(&fl.registry, "registry", "http://127.0.0.1:8321", "base URL of the CI service (the example registry)")
	fs.StringVar(&cfg.name, "name", host, "runner name (need not be unique: a token identifies the registration)")
	fs.StringVar(&cfg.statePath, "state", defaultStatePath(), "state `file`: the registration and its token, and a result not delivered yet, for a re-exec and the next start")
	fs.StringVar(&jobEnv, "job-env", "PATH,HOME,USER,LOGNAME,LANG,LC_ALL,TZ,TMPDIR", "comma-separated names of the runner's environment variables that jobs get (they get no other)")
	fs.StringVar(&joinFile, "join-token-file", "", "`file` holding the join token that registering takes (default: $"+joinTokenEnv+")")
	fs.StringVar(&runAs, "user", "", "run jobs as this `user` (the runner runs as root), so that they cannot read the runner's token")
	fs.StringVar(&labels, "labels", "linux", "comma-separated runner labels")
	fs.StringVar(&fl.sources, "sources", "auto", `notice sources: "auto" (detected on this host) or a comma-separated list of `+strings.Join(sources.Names(), ", "))
	fs.DurationVar(&cfg.poll, "poll", 2*time.Second, "how often to ask for a job when idle")
	fs.DurationVar(&cfg.grace, "grace", 30*time.Second, "longest wait for a job to exit after SIGTERM before SIGKILL")
	fs.DurationVar(&cfg.margin, "margin", 10*time.Second, "time kept before the deadline for re-queueing and unregistering")
	fs.DurationVar(&cfg.stopTimeout, "stop-timeout", 80*time.Second, "deadline of a notice that has none (SIGTERM, SIGINT), and the furthest deadline taken from a notice; keep it below systemd's TimeoutStopSec")
	fs.DurationVar(&cfg.maxHold, "max-hold", time.Hour, "the longest a held termination (an Auto Scaling lifecycle hook) lets the running job finish, from its first notice; it never goes past the hold's deadline minus -margin and -grace")
	fs.DurationVar(&cfg.registerTimeout, "register-timeout", time.Minute, "give up (exit 1) if registering fails for this long")
	fs.StringVar(&cfg.onAdvice, "on-advice", "drain", `what rebalance and maintenance notices do: "drain" (stop claiming, finish the job, stay registered) or "ignore"`)
	fs.DurationVar(&fl.imdsInterval, "imds-interval", 0, "IMDS polling interval for urgent paths (0: the imds default, 1s)")
	fs.DurationVar(&fl.imdsAdvisory, "imds-advisory-interval", 0, "IMDS polling interval for rebalance recommendations, and for the lifecycle state outside an Auto Scaling group (0: the imds default, 3s)")
	fs.BoolVar(&fl.demo, "demo", false, "run a self-contained demo: embedded registry, fake IMDS, a spot interruption")
	fs.BoolVar(&fl.version, "version", false, "print the version and exit")
	fl.ops.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil || fl.version {
		return cfg, fl, err
	}
	cfg.labels = splitList(labels)
	cfg.jobEnv = splitList(jobEnv)
	cfg.service = fl.registry
	err := cfg.validate()
	if err == nil {
		cfg.joinToken, err = readJoinToken(joinFile)
	}
	if err == nil {
		if cfg.jobUser, err = lookupJobUser(runAs); err != nil {
			err = fmt.Errorf("-user: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		return cfg, fl, err
	}
	return cfg, fl, nil
}

// joinTokenEnv holds the join token when no -join-token-file is given. A
// file (systemd's LoadCredential=) or the environment, never the command
// line, which every local user can read.
const joinTokenEnv = "TERMSIG_JOIN_TOKEN"

// readJoinToken reads the join token from the file path, or from
// $TERMSIG_JOIN_TOKEN if path is "". No token at all is "": registering
// then presents none.
func readJoinToken(path string) (secret, error) {
	if path == "" {
		return secret(strings.TrimSpace(os.Getenv(joinTokenEnv))), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("-join-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("-join-token-file: %s is empty", path)
	}
	return secret(token), nil
}

// jobsRunAs says who jobs run as, and what that lets them reach.
func jobsRunAs(u *jobUser) string {
	switch {
	case u != nil:
		return fmt.Sprintf("user %s (uid %d): they cannot read the runner's files nor its /proc files", u.name, u.uid)
	case os.Geteuid() == 0:
		return "root, the runner's user: they can read everything; give -user"
	}
	return fmt.Sprintf("the runner's user (uid %d): they can read its state file by its path; run the runner as root with -user to keep its token from them", os.Geteuid())
}

func (c config) validate() error {
	switch {
	case c.name == "":
		return fmt.Errorf("-name is empty")
	case c.poll <= 0 || c.grace <= 0 || c.margin < 0 || c.stopTimeout <= 0 || c.registerTimeout <= 0 || c.maxHold <= 0:
		return fmt.Errorf("-poll, -grace, -stop-timeout, -register-timeout and -max-hold must be positive, -margin not negative")
	case c.margin >= c.stopTimeout:
		return fmt.Errorf("-margin (%v) must be shorter than -stop-timeout (%v)", c.margin, c.stopTimeout)
	case c.onAdvice != "drain" && c.onAdvice != "ignore":
		return fmt.Errorf(`-on-advice must be "drain" or "ignore", not %q`, c.onAdvice)
	case slices.Contains(c.jobEnv, joinTokenEnv):
		return fmt.Errorf("-job-env must not give jobs the join token (%s)", joinTokenEnv)
	}
	return nil
}

func pickSources(spec string, cfg sources.Config) ([]termsig.Source, error) {
	if spec == "auto" {
		return sources.Detect(cfg), nil
	}
	return sources.ByName(cfg, splitList(spec)...)
}

func sourceNames(srcs []termsig.Source) string {
	names := make([]string, len(srcs))
	for i, s := range srcs {
		names[i] = s.Name()
	}
	return strings.Join(names, ",")
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// newLogger returns a logger for termsig's own lines (a source failing and
// recovering), written into the timeline.
func newLogger(tl *timeline) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlWriter{tl}, &slog.HandlerOptions{
		Level: slog.LevelInfo,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // the timeline stamps the line
			}
			return a
		},
	}))
}

type tlWriter struct{ tl *timeline }

func (w tlWriter) Write(b []byte) (int, error) {
	w.tl.Printf("%s", b)
	return len(b), nil
}

// sdNotify returns a function that sends a state to systemd, if the runner
// runs under it (NOTIFY_SOCKET); elsewhere it does nothing.
func sdNotify(tl *timeline) func(string) {
	return func(state string) {
		if _, err := daemon.SdNotify(false, state); err != nil {
			tl.Printf("sd_notify %s: %v", state, err)
		}
	}
}

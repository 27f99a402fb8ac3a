//go:build unix

// Command ghrunner runs a GitHub Actions self-hosted runner on a machine
// that may be taken away (a spot or preemptible VM), and cleans up after it
// before it goes: when a termination notice comes (a spot interruption, a
// preemption, SIGTERM from systemd) it cancels the workflow run of the job
// the runner is running, stops the runner, re-runs the workflow so that
// the job is picked up elsewhere, removes the runner's registration and
// exits 0, all before the notice's deadline. A termination that the
// platform holds for it (an Auto Scaling termination hook) lets the job
// finish first, then removes the registration and releases the hold.
//
//	GITHUB_TOKEN=... ghrunner -repo owner/name -runner-dir /opt/actions-runner
//
// See README.md for the flags, the token's scopes, the systemd unit and
// what happens when something fails.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/internal/buildinfo"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/signal"
	"github.com/termsig/termsig/sources"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghapi"
	"github.com/termsig/termsig/examples/ghrunner/internal/runner"
	"github.com/termsig/termsig/examples/ghrunner/internal/supervisor"
)

// exitUsage is the exit status for bad flags; supervisor.Run's are 0
// (done), 1 (failed) and 3 (the deadline came first).
const exitUsage = 2

// allowRootEnv lets the runner run as root, as actions/runner's own
// scripts have it.
const allowRootEnv = "RUNNER_ALLOW_RUNASROOT"

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

// options are the parsed flags.
type options struct {
	owner, repo string // -repo owner/name
	org         string
	apiURL      *url.URL
	configURL   string // the --url config.sh gets: the repository's or organisation's page
	token       *tokenSource
	runAs       *runner.User // -user: config.sh and run.sh run as this user
	runnerDir   string
	name        string
	labels      string
	ephemeral   bool
	sources     string
	margin      time.Duration
	stopTimeout time.Duration
	maxHold     time.Duration // how long a held termination waits for the job
	rerunAll    bool
	maxAttempts int64         // a run is not re-run once it has had this many attempts
	poll        time.Duration // how often the API is asked whether a run has completed
	callTimeout time.Duration // the longest one API request may take
	setupTime   time.Duration // the longest the start (stale registration, config.sh) may take
	logFormat   string
	imdsEvery   time.Duration
	version     bool       // -version: print the version line and exit
	ops         ops.Config // --metrics-bind-address, --health-probe-bind-address, --webhook-*
}

func realMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "ghrunner:", err)
			fmt.Fprintln(stderr, usageLine)
		}
		return exitUsage
	}
	if o.version {
		fmt.Fprintln(stdout, buildinfo.Line("ghrunner"))
		return 0
	}
	log := newLogger(stderr, o.logFormat)
	if err := hideFromSameUser(); err != nil {
		log.Warn("ghrunner: cannot hide its environment from processes of its user", "err", err)
	}
	srcs, err := pickSources(o, log)
	if err != nil {
		fmt.Fprintln(stderr, "ghrunner:", err)
		return exitUsage
	}
	// Closed last, after the Notifier has stopped: what the cleanup did
	// is posted to the webhook by then.
	srv, err := startOps(o, log)
	if err != nil {
		fmt.Fprintln(stderr, "ghrunner:", err)
		return exitUsage
	}
	defer srv.Close()
	n := termsig.Config{Logger: log}.New(srcs...)
	defer n.Stop()
	return supervise(o, log, n, stdout, srv)
}

// startOps starts serving the metrics, probes and webhook of the ops
// flags (--metrics-bind-address and the others), the runner's name and
// its repository or organisation in each event the webhook posts. An
// error names the flag.
func startOps(o *options, log *slog.Logger) (*ops.Server, error) {
	cfg := o.ops
	cfg.Name, cfg.Logger = "ghrunner", log
	cfg.Webhook.Fields = map[string]string{"runner": o.name}
	if o.org != "" {
		cfg.Webhook.Fields["org"] = o.org
	} else {
		cfg.Webhook.Fields["repo"] = o.owner + "/" + o.repo
	}
	return ops.Start(cfg)
}

// supervise runs the runner of o, with the notices of n; srv gets its
// metrics, probes and webhook events (nil: none).
func supervise(o *options, log *slog.Logger, n *termsig.Notifier, stdout io.Writer, srv *ops.Server) int {
	return supervisor.Run(supervisor.Config{
		Dir: &runner.Dir{Path: o.runnerDir, User: o.runAs, Output: stdout},
		Runner: runner.Options{
			URL: o.configURL, Name: o.name, Labels: o.labels, Ephemeral: o.ephemeral,
		},
		API: ghapi.New(ghapi.Config{
			BaseURL: o.apiURL, Token: o.token.get,
			Owner: o.owner, Repo: o.repo, Org: o.org, RunnerName: o.name,
			CallTimeout: o.callTimeout, Logger: log,
		}),
		Logger:       log,
		Margin:       o.margin,
		StopTimeout:  o.stopTimeout,
		Poll:         o.poll,
		SetupTimeout: o.setupTime,
		RerunAll:     o.rerunAll,
		MaxAttempts:  o.maxAttempts,
		MaxHold:      o.maxHold,
		Ops:          srv,
	}, n)
}

const usageLine = "usage: GITHUB_TOKEN=... ghrunner (-repo owner/name | -org name) -runner-dir DIR [-name N] [-labels a,b] [-ephemeral] [flags]"

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("ghrunner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host, _ := os.Hostname()
	o := &options{}
	var repo, apiURL, tokenFile, rerun, user string
	fs.StringVar(&repo, "repo", "", "the repository the runner serves, as owner/name")
	fs.StringVar(&o.org, "org", "", "the organisation the runner serves (instead of -repo)")
	fs.StringVar(&apiURL, "url", "https://api.github.com/", "GitHub's REST API base URL; for GitHub Enterprise Server https://HOST/api/v3/")
	fs.StringVar(&o.configURL, "config-url", "", "the --url given to config.sh (default: the repository's or organisation's page, derived from -url)")
	fs.StringVar(&tokenFile, "token-file", "", "read the API token from this file (default: $"+tokenEnv+")")
	fs.StringVar(&o.runnerDir, "runner-dir", "", "the unpacked actions/runner release (config.sh, run.sh)")
	fs.StringVar(&user, "user", "", "run config.sh and run.sh, and so every job, as this user (ghrunner runs as root, so that no job can read its token)")
	fs.StringVar(&o.name, "name", host, "the runner's name")
	fs.StringVar(&o.labels, "labels", "", "extra runner labels, comma-separated")
	fs.BoolVar(&o.ephemeral, "ephemeral", false, "register an ephemeral runner: it takes one job, then run.sh and ghrunner exit")
	fs.StringVar(&o.sources, "sources", "auto", `notice sources: "auto" (detected on this host) or a comma-separated list of `+strings.Join(sources.Names(), ", "))
	fs.DurationVar(&o.margin, "margin", 5*time.Second, "time kept before a notice's deadline: the cleanup ends this much earlier")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", 80*time.Second, "the deadline of a notice that has none (SIGTERM, SIGINT), and the furthest one taken from a notice; keep it below systemd's TimeoutStopSec")
	fs.DurationVar(&o.maxHold, "max-hold", time.Hour, "how long a held termination (an Auto Scaling termination hook) lets the running job finish, from its first notice, before it is handed back as for a hard notice; 0: at once")
	fs.StringVar(&rerun, "rerun", "failed", `what a re-run of the interrupted workflow run re-runs: "failed" (its failed and cancelled jobs) or "all"`)
	fs.Int64Var(&o.maxAttempts, "max-attempts", 5, "do not re-run a run that has had this many attempts (a job that kills its machine is not re-run for ever)")
	fs.DurationVar(&o.poll, "poll", time.Second, "how often the API is asked whether the cancelled run has completed")
	fs.DurationVar(&o.callTimeout, "api-timeout", 10*time.Second, "the longest one API request may take before it is tried again")
	fs.DurationVar(&o.setupTime, "setup-timeout", 3*time.Minute, "give up (exit 1) when the start (removing a stale registration, config.sh) takes longer")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.DurationVar(&o.imdsEvery, "imds-interval", 0, "IMDS polling interval for spot interruptions (0: the imds default, 1s)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	o.ops.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := o.check(repo, apiURL, rerun); err != nil {
		return nil, err
	}
	var err error
	if o.runAs, err = runner.LookupUser(user); err != nil {
		return nil, fmt.Errorf("-user: %w", err)
	}
	if o.runAs == nil && os.Geteuid() == 0 && os.Getenv(allowRootEnv) == "" {
		return nil, fmt.Errorf("ghrunner runs as root: give -user, the user the runner and its jobs run as (run.sh refuses root unless $%s is set)", allowRootEnv)
	}
	o.token, err = newTokenSource(tokenFile)
	return o, err
}

// check validates the flags and fills the derived fields.
func (o *options) check(repo, apiURL, rerun string) error {
	switch {
	case (repo == "") == (o.org == ""):
		return errors.New("give exactly one of -repo owner/name and -org name")
	case o.runnerDir == "":
		return errors.New("-runner-dir is required")
	case o.name == "" || strings.ContainsAny(o.name, " \t\n,"):
		return fmt.Errorf("-name %q: a runner name must be non-empty, without spaces or commas", o.name)
	case o.margin < 0 || o.maxHold < 0 || o.stopTimeout <= 0 || o.poll <= 0 || o.callTimeout <= 0 || o.setupTime <= 0 || o.maxAttempts <= 0:
		return errors.New("-margin and -max-hold must not be negative; -stop-timeout, -poll, -api-timeout, -setup-timeout and -max-attempts must be positive")
	case o.margin >= o.stopTimeout:
		return fmt.Errorf("-margin (%v) must be shorter than -stop-timeout (%v)", o.margin, o.stopTimeout)
	case rerun != "failed" && rerun != "all":
		return fmt.Errorf(`-rerun must be "failed" or "all", not %q`, rerun)
	case o.logFormat != "json" && o.logFormat != "text":
		return fmt.Errorf("-log-format must be json or text, not %q", o.logFormat)
	case o.imdsEvery < 0:
		return errors.New("-imds-interval must not be negative")
	}
	o.rerunAll = rerun == "all"
	if repo != "" {
		owner, name, ok := strings.Cut(repo, "/")
		if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("-repo %q: want owner/name", repo)
		}
		o.owner, o.repo = owner, name
	} else if strings.Contains(o.org, "/") {
		return fmt.Errorf("-org %q: want an organisation's name", o.org)
	}
	var err error
	if o.apiURL, err = parseAPIURL(apiURL); err != nil {
		return err
	}
	if o.configURL == "" {
		o.configURL, err = webURL(o.apiURL, o.scopePath())
	}
	return err
}

// scopePath is the repository's or the organisation's path: "owner/name"
// or "org".
func (o *options) scopePath() string {
	if o.org != "" {
		return o.org
	}
	return o.owner + "/" + o.repo
}

// parseAPIURL checks -url and gives it the trailing slash that go-github
// requires.
func parseAPIURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("-url %q: want an http(s) URL such as https://api.github.com/ or https://HOST/api/v3/", s)
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return nil, fmt.Errorf("-url %q: plain http would send the token in clear; only a loopback address may use it", s)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// webURL derives the page config.sh registers with from the API base:
// https://api.github.com/ gives https://github.com/PATH (also for
// api.SUBDOMAIN.ghe.com), and https://HOST/api/v3/ gives https://HOST/PATH.
func webURL(api *url.URL, path string) (string, error) {
	w := *api
	switch {
	case strings.HasPrefix(w.Host, "api.") && (w.Path == "/" || w.Path == ""):
		w.Host = strings.TrimPrefix(w.Host, "api.")
		w.Path = "/"
	case strings.HasSuffix(w.Path, "/api/v3/"):
		w.Path = strings.TrimSuffix(w.Path, "api/v3/")
	default:
		return "", fmt.Errorf("-url %s: cannot tell the web address config.sh needs from it; give -config-url", api)
	}
	return strings.TrimSuffix(w.String(), "/") + "/" + path, nil
}

// pickSources returns the notice sources: the platform's, detected here
// or named by -sources, and the signal source, named or not: SIGTERM from
// systemd must clean up as a platform notice does, and SIGHUP restart
// run.sh, never kill ghrunner.
func pickSources(o *options, log *slog.Logger) ([]termsig.Source, error) {
	cfg := sources.Config{Logger: log, IMDS: imds.Config{Interval: o.imdsEvery}, PlatformOnly: true}
	var srcs []termsig.Source
	if o.sources == "auto" {
		srcs = sources.Detect(cfg)
	} else {
		var names []string
		for _, s := range strings.Split(o.sources, ",") {
			if s = strings.TrimSpace(s); s != "" && s != signal.Name {
				names = append(names, s)
			}
		}
		var err error
		if srcs, err = sources.ByName(cfg, names...); err != nil {
			return nil, err
		}
	}
	return append(srcs, signal.New()), nil
}

// loopback reports whether host is localhost or a loopback address.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newLogger(w io.Writer, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

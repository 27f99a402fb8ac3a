//go:build unix

// Command watch brings termsig to programs that are not written in Go. It
// watches the termination notices of the host it runs on (a spot
// interruption, a preemption, a power-button press, maintenance) and
// turns them into what any program understands:
//
//	watch                      # print each notice as one JSON line
//	watch --exec 'CMD'         # run a shell hook per notice
//	watch [flags] -- CMD ARGS  # supervise CMD: a platform notice becomes SIGTERM
//
// See README.md for the flags, the exit statuses and recipes (a systemd
// unit, a Kubernetes sidecar, a webhook).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/sources"
)

// Exit statuses of watch itself; in supervise mode watch exits with the
// child's status instead.
const (
	exitOK      = 0
	exitFailed  = 1 // a hook failed, or watch could not start
	exitUsage   = 2
	exitNoChild = 127 // the command could not be started, as a shell says
)

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

// options are the parsed flags.
type options struct {
	format      string // print mode: json or text
	follow      bool
	exec        string
	hookTimeout time.Duration
	signal      syscall.Signal
	margin      time.Duration
	grace       time.Duration
	maxDrain    time.Duration
	kinds       map[termsig.Kind]bool // nil: every kind
	sources     string
	logFormat   string
	imdsEvery   time.Duration
	acpidSocket string
	cmd         []string
}

func realMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "watch:", err)
			fmt.Fprintln(stderr, usageLine)
		}
		return exitUsage
	}
	log := newLogger(stderr, o.logFormat)
	srcs, err := o.pickSources(log)
	if err != nil {
		fmt.Fprintln(stderr, "watch:", err)
		fmt.Fprintln(stderr, usageLine)
		return exitUsage
	}
	switch {
	case len(o.cmd) > 0:
		return supervise(o, srcs, log)
	case o.exec != "":
		return runHooks(o, srcs, log)
	default:
		return printNotices(o, srcs, stdout, log)
	}
}

const usageLine = "usage: watch [--format json|text] [--follow] [--exec CMD] [--kinds K,...] [--sources S,...] [flags] [-- CMD ARGS...]"

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var kinds, sig string
	fs.StringVar(&o.format, "format", "json", "print mode: json (one Notice per line) or text")
	fs.BoolVar(&o.follow, "follow", false, "print mode and --exec: keep going after the first imminent notice")
	fs.StringVar(&o.exec, "exec", "", "run this shell command (/bin/sh -c) once per notice, the notice in its environment and as JSON on stdin")
	fs.DurationVar(&o.hookTimeout, "hook-timeout", 0, "longest a hook may run (0: until the notice's deadline minus --margin, or --grace without one)")
	fs.StringVar(&sig, "signal", "SIGTERM", "supervise mode: the signal an imminent platform notice sends to the command")
	fs.DurationVar(&o.margin, "margin", 5*time.Second, "time kept before a notice's deadline: SIGKILL and the end of hooks come this much earlier")
	fs.DurationVar(&o.grace, "grace", 30*time.Second, "how long the command (or a hook) gets when a notice has no deadline")
	fs.DurationVar(&o.maxDrain, "max-drain", 15*time.Minute, "the longest a notice's deadline may give the command (or a hook): one further away counts as this far (a notice without a deadline gets --grace)")
	fs.StringVar(&kinds, "kinds", "", "only these kinds of notice, comma-separated (terminate,stop,hibernate,reboot,interrupt,reload,rebalance,maintenance,cleared); empty: all")
	fs.StringVar(&o.sources, "sources", "auto", `notice sources: "auto" (detected on this host) or a comma-separated list of `+strings.Join(sources.Names(), ", "))
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.DurationVar(&o.imdsEvery, "imds-interval", 0, "IMDS polling interval for spot interruptions (0: the imds default, 1s)")
	fs.StringVar(&o.acpidSocket, "acpid-socket", "", "acpid's socket (empty: the acpi default, used if present)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.cmd = fs.Args()
	dashes := len(args) > len(o.cmd) && args[len(args)-len(o.cmd)-1] == "--"
	switch {
	case dashes && len(o.cmd) == 0:
		return nil, errors.New("no command after --")
	case len(o.cmd) > 0 && o.cmd[0] == "":
		return nil, errors.New("the command to supervise is empty")
	}
	return o, o.check(kinds, sig)
}

// check validates the parsed flags and fills the derived fields.
func (o *options) check(kinds, sig string) error {
	switch {
	case o.format != "json" && o.format != "text":
		return fmt.Errorf("--format must be json or text, not %q", o.format)
	case o.logFormat != "json" && o.logFormat != "text":
		return fmt.Errorf("--log-format must be json or text, not %q", o.logFormat)
	case o.exec != "" && len(o.cmd) > 0:
		return errors.New("--exec and a command to supervise exclude each other")
	case o.follow && len(o.cmd) > 0:
		return errors.New("--follow has no meaning when supervising a command: watch ends with it")
	case o.margin < 0 || o.grace <= 0 || o.maxDrain <= 0 || o.hookTimeout < 0 || o.imdsEvery < 0:
		return errors.New("--margin, --hook-timeout and --imds-interval must not be negative, --grace and --max-drain must be positive")
	}
	if o.signal = parseSignal(sig); o.signal == 0 {
		return fmt.Errorf("--signal: unknown signal %q", sig)
	}
	if kinds == "" {
		return nil
	}
	o.kinds = map[termsig.Kind]bool{}
	for _, w := range strings.Split(kinds, ",") {
		k, err := termsig.ParseKind(strings.TrimSpace(w))
		if err != nil {
			return fmt.Errorf("--kinds: %w", err)
		}
		o.kinds[k] = true
	}
	return nil
}

// parseSignal reads "SIGTERM", "TERM", "term" or "15"; 0 means none.
func parseSignal(s string) syscall.Signal {
	if n, err := strconv.Atoi(s); err == nil {
		if n > 0 && unix.SignalName(syscall.Signal(n)) != "" {
			return syscall.Signal(n)
		}
		return 0
	}
	up := strings.ToUpper(s)
	if sig := unix.SignalNum(up); sig != 0 {
		return sig
	}
	return unix.SignalNum("SIG" + up)
}

// wants reports whether nt passes the --kinds filter. A signal sent to
// watch itself that ends it always passes: --kinds must not make watch
// deaf to SIGTERM.
func (o *options) wants(nt termsig.Notice) bool {
	return o.kinds == nil || o.kinds[nt.Kind] || isOwnSignal(nt) && nt.Kind.Imminent()
}

// drainEnd is when the time to leave after imminent notice nt is up: its
// deadline minus --margin, or --grace after it without a deadline. A
// deadline further than --max-drain after the notice (year 9999: a server
// can send anything) counts as --max-drain after it; capped says so.
func (o *options) drainEnd(nt termsig.Notice) (end time.Time, capped bool) {
	seen := nt.Observed
	if seen.IsZero() {
		seen = time.Now()
	}
	if nt.Deadline.IsZero() {
		return seen.Add(o.grace), false
	}
	end, limit := nt.Deadline.Add(-o.margin), seen.Add(o.maxDrain)
	if end.After(limit) {
		return limit, true
	}
	return end, false
}

// isOwnSignal reports whether nt is a signal sent to watch itself.
func isOwnSignal(nt termsig.Notice) bool {
	_, ok := nt.Signal.(syscall.Signal)
	return ok
}

// pickSources returns the sources to watch. When supervising, watch
// forwards the signals it receives to the command itself, so the signal
// source is left out.
func (o *options) pickSources(log *slog.Logger) ([]termsig.Source, error) {
	cfg := sources.Config{
		Logger: log,
		IMDS:   imds.Config{Interval: o.imdsEvery},
		ACPI:   acpi.Config{AcpidSocket: o.acpidSocket},
		// Print mode hands a line to its reader and has nothing to wait
		// for: it does not hold the host's shutdowns.
		Logind: logind.Config{NoLock: o.exec == "" && len(o.cmd) == 0},
	}
	cfg.PlatformOnly = len(o.cmd) > 0
	var srcs []termsig.Source
	if o.sources == "auto" {
		srcs = sources.Detect(cfg)
	} else {
		var err error
		named := cfg
		named.PlatformOnly = false // filtered below
		if srcs, err = sources.ByName(named, strings.Split(o.sources, ",")...); err != nil {
			return nil, err
		}
	}
	if len(o.cmd) == 0 {
		return srcs, nil
	}
	// --sources may name signal for the modes that print; the
	// supervisor forwards the signals it gets to the command instead.
	var platform []termsig.Source
	for _, s := range srcs {
		if d, ok := s.(termsig.Describer); !ok || !d.Traits().Local {
			platform = append(platform, s)
		}
	}
	return platform, nil
}

func newLogger(w io.Writer, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// newNotifier starts the sources with watch's logger, and says so once
// they are set up (signal handlers installed, subscriptions open).
func newNotifier(srcs []termsig.Source, log *slog.Logger) *termsig.Notifier {
	n := termsig.Config{Logger: log}.New(srcs...)
	names := make([]string, len(srcs))
	for i, s := range srcs {
		names[i] = s.Name()
	}
	log.Info("watch: watching", "sources", strings.Join(names, ","))
	return n
}

// releaseNow tells nt's source that watch is done with it
// (termsig.Notifier.Release): logind's delay lock then lets the shutdown
// go on at once instead of holding it until its delay runs out, and
// Azure starts the event now. release may be nil (unit tests): nothing
// to tell.
func releaseNow(release func(context.Context, termsig.Notice) error, nt termsig.Notice, log *slog.Logger) {
	if release == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := release(ctx, nt); err != nil {
		log.Warn("watch: release", "notice", nt, "err", err)
		return
	}
	log.Debug("watch: released the notice", "notice", nt)
}

// letGo releases a notice that watch does not act on, if its source only
// holds the platform back (logind's lock): the shutdown need not wait for
// a cleanup that is not coming. A source whose Release asks the platform
// to start an event early (Azure) is left alone: not acting on an event
// is no reason to bring it forward.
func letGo(release func(context.Context, termsig.Notice) error, nt termsig.Notice, log *slog.Logger) {
	if nt.Source == logind.Name {
		releaseNow(release, nt, log)
	}
}

// nothingRuns reports, once every source has had its first look, whether
// none of them is left running (none applies here, or each one's
// configuration is wrong): watch would then wait for ever, so it logs why
// and the caller exits.
func nothingRuns(n *termsig.Notifier, log *slog.Logger) bool {
	for _, st := range n.Status() {
		if st.State == termsig.StateRunning {
			return false
		}
	}
	for _, st := range n.Status() {
		log.Error("watch: source ended", "source", st.Name, "state", st.State.String(), "err", st.Err)
	}
	log.Error("watch: no source can work here; nothing to watch")
	return true
}

// ends reports whether watch, in print or hook mode without --follow,
// stops after nt; with --follow only an imminent notice about watch itself
// (a signal sent to it) does.
func (o *options) ends(nt termsig.Notice) bool {
	return nt.Kind.Imminent() && (!o.follow || isOwnSignal(nt))
}

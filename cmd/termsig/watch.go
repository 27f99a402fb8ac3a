//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/sources"
)

// options are the parsed flags.
type options struct {
	mode        string // modePrint, modeHook or modeSupervise
	format      string // print mode: json or text
	follow      bool
	exec        string
	hookTimeout time.Duration
	signal      syscall.Signal
	finish      syscall.Signal // supervise: what a held notice sends the command
	maxHold     time.Duration  // supervise: the longest wait under a hold
	margin      time.Duration
	grace       time.Duration
	maxDrain    time.Duration
	kinds       map[termsig.Kind]bool // nil: every kind
	sources     string
	logFormat   string
	imdsEvery   time.Duration
	acpidSocket string
	ops         ops.Config // --metrics-bind-address, --health-probe-bind-address
	cmd         []string
}

// The modes of the commands that watch the host.
const (
	modePrint     = "print"
	modeHook      = "hook"
	modeSupervise = "supervise"
)

// watchMain runs termsig print, hook or supervise (mode) with args, the
// arguments after the command's name.
func watchMain(mode string, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(mode, args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "termsig %s: %v\n%s\n", mode, err, usageLines[mode])
		return exitUsage
	}
	log := newLogger(stderr, o.logFormat)
	srcs, err := o.pickSources(log)
	if err != nil {
		fmt.Fprintf(stderr, "termsig %s: %v\n", mode, err)
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintln(stderr, usageLines[mode])
			return exitUsage
		}
		return exitFailed
	}
	o.ops.Name, o.ops.Logger = "termsig", log
	srv, err := ops.Start(o.ops)
	if err != nil {
		fmt.Fprintf(stderr, "termsig %s: %v\n", mode, err)
		return exitUsage
	}
	defer srv.Close()
	switch mode {
	case modeSupervise:
		return supervise(o, srcs, log, srv)
	case modeHook:
		return runHooks(o, srcs, log, srv)
	default:
		return printNotices(o, srcs, stdout, log, srv)
	}
}

// usageLines are the one-line usages of the modes.
var usageLines = map[string]string{
	modePrint:     "usage: termsig print [--format json|text] [--follow] [--kinds K,...] [--sources S,...] [flags]",
	modeHook:      "usage: termsig hook [--follow] [--hook-timeout D] [--kinds K,...] [--sources S,...] [flags] 'SHELL COMMAND'",
	modeSupervise: "usage: termsig supervise [--signal SIG] [--finish-signal SIG] [--max-hold D] [--margin D] [--grace D] [--kinds K,...] [--sources S,...] [flags] -- CMD ARGS...",
}

// usageError is an error in the command line, as opposed to the host.
type usageError struct{ error }

// parseFlags parses the flags of mode; -h prints its usage on stdout and
// returns flag.ErrHelp.
func parseFlags(mode string, args []string, stdout, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("termsig "+mode, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &options{mode: mode}
	var kinds, sig, finish string
	switch mode {
	case modePrint:
		fs.StringVar(&o.format, "format", "json", "json (one Notice per line) or text")
		fs.BoolVar(&o.follow, "follow", false, "keep going after the first imminent notice")
	case modeHook:
		fs.BoolVar(&o.follow, "follow", false, "keep going after the first imminent notice")
		fs.DurationVar(&o.hookTimeout, "hook-timeout", 0, "longest a hook may run (0: until the notice's deadline minus --margin, or --grace without one)")
	case modeSupervise:
		fs.StringVar(&sig, "signal", "SIGTERM", "the signal an imminent platform notice sends to the command")
		fs.StringVar(&finish, "finish-signal", "SIGTERM", "the signal a held termination (an Auto Scaling hook) sends to the command: finish, then exit (gitlab-runner: SIGQUIT); termsig releases the hold once the command has exited")
		fs.DurationVar(&o.maxHold, "max-hold", time.Hour, "the longest a held termination waits for the command, from its first notice; then, or at the hold's deadline minus --margin, --signal and SIGKILL as for any imminent notice")
	}
	if mode != modePrint {
		fs.DurationVar(&o.margin, "margin", 5*time.Second, "time kept before a notice's deadline: SIGKILL and the end of hooks come this much earlier")
		fs.DurationVar(&o.grace, "grace", 30*time.Second, "how long the command (or a hook) gets when a notice has no deadline")
		fs.DurationVar(&o.maxDrain, "max-drain", 15*time.Minute, "the longest a notice's deadline may give the command (or a hook): one further away counts as this far (a notice without a deadline gets --grace)")
	}
	fs.StringVar(&kinds, "kinds", "", "only these kinds of notice, comma-separated (terminate,stop,hibernate,reboot,interrupt,reload,rebalance,maintenance,cleared); empty: all")
	fs.StringVar(&o.sources, "sources", "auto", `notice sources: "auto" (detected on this host) or a comma-separated list of `+strings.Join(sources.Names(), ", "))
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.DurationVar(&o.imdsEvery, "imds-interval", 0, "IMDS polling interval for spot interruptions (0: the imds default, 1s)")
	fs.StringVar(&o.acpidSocket, "acpid-socket", "", "acpid's socket (empty: the acpi default, used if present)")
	o.ops.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, usageLines[mode])
			fmt.Fprintln(stdout, "\nflags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return nil, err
	}
	rest := fs.Args()
	switch mode {
	case modePrint:
		if len(rest) > 0 {
			return nil, fmt.Errorf("takes no arguments, not %q (a command to run: termsig hook or termsig supervise)", rest[0])
		}
	case modeHook:
		switch {
		case len(rest) == 0:
			return nil, errors.New("no shell command")
		case len(rest) > 1 && strings.HasPrefix(rest[1], "-"):
			return nil, fmt.Errorf("flags come before the shell command, not after it (%q)", rest[1])
		case len(rest) > 1:
			return nil, fmt.Errorf("takes one shell command, not %d arguments: quote it", len(rest))
		case strings.TrimSpace(rest[0]) == "":
			return nil, errors.New("the shell command is empty")
		}
		o.exec = rest[0]
	case modeSupervise:
		switch {
		case len(rest) == 0:
			return nil, errors.New("no command to supervise")
		case rest[0] == "":
			return nil, errors.New("the command to supervise is empty")
		}
		o.cmd = rest
	}
	return o, o.check(kinds, sig, finish)
}

// check validates the parsed flags and fills the derived fields.
func (o *options) check(kinds, sig, finish string) error {
	switch {
	case o.mode == modePrint && o.format != "json" && o.format != "text":
		return fmt.Errorf("--format must be json or text, not %q", o.format)
	case o.logFormat != "json" && o.logFormat != "text":
		return fmt.Errorf("--log-format must be json or text, not %q", o.logFormat)
	case o.mode != modePrint && (o.margin < 0 || o.grace <= 0 || o.maxDrain <= 0) || o.hookTimeout < 0 || o.imdsEvery < 0:
		return errors.New("--margin, --hook-timeout and --imds-interval must not be negative, --grace and --max-drain must be positive")
	case o.mode == modeSupervise && o.maxHold <= 0:
		return errors.New("--max-hold must be positive")
	case o.imdsEvery > 0 && o.imdsEvery < imds.FloorInterval:
		return fmt.Errorf("--imds-interval must be at least %v (IMDS throttles each instance), or 0 for the default", imds.FloorInterval)
	}
	if sig != "" {
		if o.signal = parseSignal(sig); o.signal == 0 {
			return fmt.Errorf("--signal: unknown signal %q", sig)
		}
	}
	if finish != "" {
		if o.finish = parseSignal(finish); o.finish == 0 {
			return fmt.Errorf("--finish-signal: unknown signal %q", finish)
		}
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
// termsig itself that ends it always passes: --kinds must not make termsig
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

// isOwnSignal reports whether nt is a signal sent to termsig itself.
func isOwnSignal(nt termsig.Notice) bool {
	_, ok := nt.Signal.(syscall.Signal)
	return ok
}

// pickSources returns the sources to watch: those detected on this host,
// or those named by --sources. A named source that does not apply on this
// host, and any source whose configuration is wrong (an endpoint that is
// not a URL, a missing acpid socket given by --acpid-socket), is an error
// here, in every mode: termsig would otherwise run unprotected. Unknown
// or repeated names are a usageError. When supervising, termsig forwards
// the signals it receives to the command itself, so the signal source is
// left out (naming it there means: only forward signals).
func (o *options) pickSources(log *slog.Logger) ([]termsig.Source, error) {
	cfg := sources.Config{
		Logger: log,
		IMDS:   imds.Config{Interval: o.imdsEvery},
		ACPI:   acpi.Config{AcpidSocket: o.acpidSocket},
		// Print mode hands a line to its reader and has nothing to wait
		// for: it does not hold the host's shutdowns.
		Logind: logind.Config{NoLock: o.mode == modePrint},
	}
	var srcs []termsig.Source
	named := o.sources != "auto"
	if named {
		var err error
		if srcs, err = sources.ByName(cfg, strings.Split(o.sources, ",")...); err != nil {
			return nil, usageError{fmt.Errorf("--sources: %w", err)}
		}
	} else {
		srcs = sources.Detect(cfg)
	}
	var picked []termsig.Source
	for _, s := range srcs {
		if d, ok := s.(termsig.Detector); ok {
			switch err := d.Available(); {
			case err == nil:
			case !errors.Is(err, termsig.ErrUnavailable):
				return nil, fmt.Errorf("source %s is misconfigured: %w", s.Name(), err)
			case named:
				return nil, fmt.Errorf("--sources %s: it does not apply on this host: %w (see termsig sources)", s.Name(), err)
			default:
				continue // Detect left it out already
			}
		}
		if o.mode == modeSupervise && isLocal(s) {
			continue
		}
		picked = append(picked, s)
	}
	return picked, nil
}

// isLocal reports whether s's notices concern only this process (the
// signal source).
func isLocal(s termsig.Source) bool {
	d, ok := s.(termsig.Describer)
	return ok && d.Traits().Local
}

func newLogger(w io.Writer, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// newNotifier starts the sources with termsig's logger, hands them to
// srv's metrics and /readyz, and says so once they are set up (signal
// handlers installed, subscriptions open).
func newNotifier(srcs []termsig.Source, log *slog.Logger, srv *ops.Server) *termsig.Notifier {
	n := termsig.Config{Logger: log}.New(srcs...)
	srv.Watch(n)
	names := make([]string, len(srcs))
	for i, s := range srcs {
		names[i] = s.Name()
	}
	log.Info("termsig: watching", "sources", strings.Join(names, ","))
	return n
}

// Bounds on a Release. A notice that is not held is released locally or
// on loopback (logind closes a lock, Azure's metadata service takes an
// acknowledgement). Ending a hold is a call to the platform's API (Auto
// Scaling's CompleteLifecycleAction), retried when throttled, and a hold
// that is not ended keeps the instance until the hold lapses: it gets
// longer.
const (
	releaseTimeout     = time.Second
	heldReleaseTimeout = 10 * time.Second
)

// releaseNow tells nt's source that termsig is done with it
// (termsig.Notifier.Release): logind's delay lock then lets the shutdown
// go on at once instead of holding it until its delay runs out, Azure
// starts the event now, and an Auto Scaling hold ends, so that the
// instance goes now. release may be nil (unit tests): nothing to tell.
func releaseNow(release func(context.Context, termsig.Notice) error, nt termsig.Notice, log *slog.Logger) {
	if release == nil {
		return
	}
	timeout := releaseTimeout
	if nt.Held {
		timeout = heldReleaseTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := release(ctx, nt); err != nil {
		log.Warn("termsig: release", "notice", nt, "err", err)
		return
	}
	if nt.Held {
		log.Info("termsig: released the hold: the platform goes ahead now", "notice", nt)
		return
	}
	log.Debug("termsig: released the notice", "notice", nt)
}

// letGo releases a notice that termsig does not act on, if its source only
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
// configuration is wrong): termsig would then wait for ever, so it logs why
// and the caller exits.
func nothingRuns(n *termsig.Notifier, log *slog.Logger) bool {
	for _, st := range n.Status() {
		if st.State == termsig.StateRunning {
			return false
		}
	}
	for _, st := range n.Status() {
		log.Error("termsig: source ended", "source", st.Name, "state", st.State.String(), "err", st.Err)
	}
	log.Error("termsig: no source can work here; nothing to watch")
	return true
}

// ends reports whether termsig, in print or hook mode without --follow,
// stops after nt; with --follow only an imminent notice about termsig itself
// (a signal sent to it) does.
func (o *options) ends(nt termsig.Notice) bool {
	return nt.Kind.Imminent() && (!o.follow || isOwnSignal(nt))
}

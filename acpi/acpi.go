package acpi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/health"
)

// Name is the name of the source, in notices and in termsig.Notifier.Status.
const Name = "acpi"

var (
	_ termsig.Detector  = (*Source)(nil)
	_ termsig.Describer = (*Source)(nil)
)

// EventPowerButton is the [termsig.Notice.Event] of every notice of the
// source: a press of the power button.
const EventPowerButton = "power-button"

// The default places of [Config], below [Config.Root].
const (
	DefaultAcpidSocket  = "/var/run/acpid.socket"
	DefaultInputDevices = "/dev/input/event*"
)

// sysfsDir is where sysfs is mounted, below Config.Root: the key
// capabilities of device eventN are read from
// sysfsDir/class/input/eventN/device/capabilities/key and its name from
// .../device/name.
const sysfsDir = "/sys"

// The defaults of the Config fields that only tests set (export_test.go):
// they are what a host needs, so no user has a reason to change them.
const (
	// defaultDedupeWindow is how long after a press that gave a notice
	// further presses are taken for the same one: one press reaches
	// several transports, and acpid reports it twice.
	defaultDedupeWindow = 2 * time.Second
	// defaultBackoff and defaultMaxBackoff bound the wait before
	// reconnecting to acpid or re-subscribing to netlink after a failure.
	defaultBackoff    = 100 * time.Millisecond
	defaultMaxBackoff = 5 * time.Second
)

// A Transport is a way the power button reaches user space, or a set of
// them.
type Transport uint8

// The transports. Combine them with |.
const (
	// Netlink is the kernel's generic netlink family "acpi_event",
	// multicast group "acpi_mc_group", both resolved by name. It carries a
	// struct acpi_genl_event; a press is device class "button/power" with
	// type 0x80. The family exists only in the host's initial network
	// namespace, so a container with a network namespace of its own does
	// not see it.
	Netlink Transport = 1 << iota
	// Acpid is acpid's UNIX socket, one line per event, such as
	// "button/power PBTN 00000080 00000000"; tokens after the fourth are
	// ignored.
	Acpid
	// Input is the input devices (evdev) that have a KEY_POWER key; a
	// press is an EV_KEY/KEY_POWER event with value 1 (not the release, 0,
	// nor an autorepeat, 2).
	Input

	// AllTransports is every transport.
	AllTransports = Netlink | Acpid | Input
)

// String returns the names of the transports in t, joined by "+", such as
// "netlink+acpid", or "none".
func (t Transport) String() string {
	if t == 0 {
		return "none"
	}
	var names []string
	for _, x := range []struct {
		t    Transport
		name string
	}{{Netlink, "netlink"}, {Acpid, "acpid"}, {Input, "input"}} {
		if t&x.t != 0 {
			names = append(names, x.name)
			t &^= x.t
		}
	}
	if t != 0 {
		names = append(names, fmt.Sprintf("transport(%#x)", uint8(t)))
	}
	return strings.Join(names, "+")
}

// Config configures a [Source]. The zero Config is ready to use: it watches
// every transport at its usual place.
//
// A transport that is missing from its default place is simply not used.
// A place that the Config sets is a promise that the transport is there.
// Watch (and [Source.Available]) check the Config first, and return an
// error that starts "acpi: " and names the field, which a
// [termsig.Notifier] shows as a failed source, if
//
//   - Transports has bits outside AllTransports;
//   - on Linux, for a transport that Transports selects: AcpidSocket is
//     set and is not there or is not a socket, or InputDevices is set and
//     is not a valid glob (see filepath.Match) or matches no file.
//
// The first is checked on every system; the paths only on Linux, where
// they mean something.
type Config struct {
	// Transports are the transports to use when they are available; zero
	// means AllTransports.
	Transports Transport

	// Root is the directory below which the default places are looked
	// for (DefaultAcpidSocket, DefaultInputDevices, and sysfs at /sys);
	// empty means "/". Set it when the program runs in a container that
	// sees the host's root filesystem under another directory, such as
	// /host. sources.Detect hands its own Root down, and a test points it
	// at a fake host laid out like "/" (see acpitest.Input.Root). The
	// netlink transport is the kernel's and does not depend on it; paths
	// set below are used as they are.
	Root string

	// AcpidSocket is the path of acpid's socket; empty means
	// DefaultAcpidSocket, "/var/run/acpid.socket" (below Root), used only
	// if it is there when Watch starts.
	AcpidSocket string

	// InputDevices is a glob of the input device nodes to consider; empty
	// means DefaultInputDevices, "/dev/input/event*" (below Root). Symbolic
	// links (such as /dev/input/by-path/*-event-kbd) are followed. Each
	// device's key capabilities are read from sysfs below Root
	// (/sys/class/input/eventN/device/capabilities/key), and only those
	// with KEY_POWER are used. A device that cannot be read (event devices
	// are usually root:input 0660) is skipped. A keyboard that has a power
	// key is read too; its other keys are neither kept nor logged.
	InputDevices string

	// Logger receives one line per change of state that is not health
	// (which transports are watched, an input device gone, a press) and,
	// at debug level, the connections made and the events that are
	// ignored. Failures that Watch retries (acpid gone, netlink failing)
	// are not logged here: they are reported with [termsig.Run.Report],
	// and the Notifier logs each change. Nil means slog.Default(); pass
	// slog.New(slog.DiscardHandler) to silence it.
	Logger *slog.Logger

	// Set by tests only (export_test.go); zero means the default.
	dedupeWindow time.Duration // defaultDedupeWindow; negative: every report is a notice
	backoff      time.Duration // defaultBackoff
	maxBackoff   time.Duration // defaultMaxBackoff; below backoff means backoff
}

// A Source reports presses of the ACPI power button as termsig.Terminate
// notices. Create one with [New].
//
// A Source has no state of its own between calls: it may be watched by
// several Notifiers at once, each with its own sockets and files.
type Source struct {
	cfg Config // as given to New: which places were set explicitly
}

// New returns a Source configured by cfg. It checks nothing and opens
// nothing: Watch does.
func New(cfg Config) *Source { return &Source{cfg: cfg} }

// withDefaults returns c with each zero field set to its default and the
// default places below Root. It is the one place where the defaults are
// applied; check looks at the Config as given, since a place it sets is a
// promise and a default place is not.
func (c Config) withDefaults() Config {
	if c.Transports == 0 {
		c.Transports = AllTransports
	}
	if c.AcpidSocket == "" {
		c.AcpidSocket = c.under(DefaultAcpidSocket)
	}
	if c.InputDevices == "" {
		c.InputDevices = c.under(DefaultInputDevices)
	}
	if c.dedupeWindow == 0 {
		c.dedupeWindow = defaultDedupeWindow
	}
	if c.backoff <= 0 {
		c.backoff = defaultBackoff
	}
	if c.maxBackoff <= 0 {
		c.maxBackoff = defaultMaxBackoff
	}
	c.maxBackoff = max(c.maxBackoff, c.backoff)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// under returns path below c.Root.
func (c Config) under(path string) string {
	if c.Root == "" || c.Root == "/" {
		return path
	}
	return filepath.Join(c.Root, path)
}

// check returns the error that Watch returns at once for a Config that
// cannot work (see [Config]). c is the Config as given.
func (c Config) check() error {
	if c.Transports&^AllTransports != 0 {
		return fmt.Errorf("acpi: Config.Transports (%v) has bits outside AllTransports", c.Transports)
	}
	return c.checkPaths()
}

// Traits says that the first look is quick and local, so termsig.New
// waits for it: Watch calls [termsig.Run.Ready] once it has subscribed to
// the kernel's netlink family, opened the input devices and made its first
// attempt to connect to acpid, whether that worked or not (a failure is
// reported with [termsig.Run.Report] before Ready, and retried after);
// each is a system call on this host, and the connection attempt is
// bounded (1 s) in case acpid does not accept. A press after termsig.New has returned is
// then not missed by the transports that are open: the kernel keeps it
// until it is read.
func (s *Source) Traits() termsig.Traits { return termsig.Traits{LocalFirstLook: true} }

// Name returns "acpi".
func (s *Source) Name() string { return Name }

// Available reports whether Watch would find a transport if it started
// now. It is quick and local (a netlink request to the kernel, a stat, a
// few sysfs files; no network), so that sources.Detect may call it. It
// returns:
//
//   - the error that Watch would return at once if the Config cannot work
//     (see [Config]), on any host: a source that cannot work because of
//     its Config should fail where it shows, so a caller that picks
//     sources with Available, such as sources.Detect, should keep this one
//     and let Watch fail rather than leave it out quietly;
//   - an error wrapping [termsig.ErrUnavailable] when none of the
//     transports of Config.Transports is there, and always on systems
//     other than Linux;
//   - nil otherwise. Watch logs which transports it uses when it starts.
func (s *Source) Available() error {
	if err := s.cfg.check(); err != nil {
		return err
	}
	c := s.cfg.withDefaults()
	ts := c.open()
	for _, t := range ts {
		t.close()
	}
	if len(ts) == 0 {
		return c.unavailable()
	}
	return nil
}

// unavailable is the error of a source that finds no transport: what it
// saw of each transport it was to use, on one line. c has its defaults.
func (c Config) unavailable() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("acpi: the power button is watched on Linux only: %w", termsig.ErrUnavailable)
	}
	var why []string
	if c.Transports&Netlink != 0 {
		why = append(why, "the kernel's netlink family "+genlFamily+" cannot be subscribed to")
	}
	if c.Transports&Acpid != 0 {
		if fi, err := os.Stat(c.AcpidSocket); err == nil && fi.Mode()&os.ModeSocket == 0 {
			why = append(why, c.AcpidSocket+" is not a socket")
		} else {
			why = append(why, "no acpid socket at "+c.AcpidSocket)
		}
	}
	if c.Transports&Input != 0 {
		if m, _ := filepath.Glob(c.InputDevices); len(m) == 0 {
			why = append(why, "no input device at "+c.InputDevices)
		} else {
			why = append(why, fmt.Sprintf("none of the %d input devices at %s is readable and has KEY_POWER", len(m), c.InputDevices))
		}
	}
	return fmt.Errorf("acpi: no power-button transport: %s: %w", strings.Join(why, ", "), termsig.ErrUnavailable)
}

// Watch sends a termsig.Terminate notice for each press of the power
// button, until ctx is done. It follows the contract of termsig.Source:
//
//   - It returns an error at once if the Config cannot work (see
//     [Config]).
//   - It uses every transport of Config.Transports that is available when
//     it starts, and returns an error wrapping termsig.ErrUnavailable at
//     once when there is none (on systems other than Linux, always).
//   - Its first look is the netlink subscription, the input devices
//     opened and a first attempt to connect to acpid; then it calls
//     [termsig.Run.Ready] (see [Source.Traits]).
//   - One press gives one notice, however many transports report it
//     (see the package documentation). Its Event is [EventPowerButton];
//     its Reason names the device and the transport, such as "power button
//     LNXPWRBN:00 (netlink)"; its Deadline is zero (unknown); Raw is the
//     acpid line, the netlink event in acpid's format, or the input_event
//     record in hex.
//   - Other ACPI events (lid, sleep button, AC adapter, battery, thermal)
//     are not notices: they are logged at debug level.
//   - When acpid goes away, or the netlink subscription fails, Watch
//     reconnects with backoff and reports the failure with
//     [termsig.Run.Report] until it works again; it does not log it
//     itself. Each connection counts as hearing from the origin
//     ([termsig.Run.Heard]).
//   - It returns an error other than ctx's only when every transport it
//     used has ended for good, which happens only to input devices (a
//     device removed, a recording read to its end).
//
// Watch returns within milliseconds of ctx being done and leaves no
// goroutine, open socket or file behind.
func (s *Source) Watch(ctx context.Context, r *termsig.Run) error {
	if err := s.cfg.check(); err != nil {
		return err
	}
	c := s.cfg.withDefaults()
	return c.watch(ctx, r, c.open())
}

// watch runs the transports ts, each in its own goroutine, and sends their
// presses with r until ctx is done or every transport has ended. It
// returns when they have all returned.
func (c Config) watch(ctx context.Context, r *termsig.Run, ts []transport) error {
	if len(ts) == 0 {
		return c.unavailable()
	}
	var used Transport
	for _, t := range ts {
		used |= t.kind()
	}
	w := &watcher{cfg: c, log: c.Logger, presses: make(chan press), health: health.New(r, len(ts))}
	w.log.Info("acpi: watching the power button", "transports", used.String())

	// Buffered for every transport, so that none waits to say it ended.
	ended := make(chan error, len(ts))
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, t := range ts {
		wg.Go(func() { ended <- t.run(ctx, w, i) })
	}
	return w.forward(ctx, r, ended, len(ts))
}

// forward sends a notice for each press that is not the same press again,
// until ctx is done or the live transports have all ended.
//
// Its send blocks while a slow consumer holds the notice back, and that
// is all it needs: the transports wait to hand over their next press
// meanwhile (the kernel and acpid keep what they have not read), and a
// transport that ends waits in ended, which has room for every one, to be
// counted once the notice is on C.
func (w *watcher) forward(ctx context.Context, r *termsig.Run, ended <-chan error, live int) error {
	d := deduper{window: w.cfg.dedupeWindow}
	var errs []error
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-ended:
			if ctx.Err() != nil {
				// Transports end when ctx does: that is a stop, not a failure.
				return ctx.Err()
			}
			live--
			errs = append(errs, err)
			if live == 0 {
				return fmt.Errorf("acpi: every transport has ended: %w", errors.Join(errs...))
			}
		case p := <-w.presses:
			if !d.accept(p.at) {
				w.log.Debug("acpi: same press again, dropped", "transport", p.t.String(), "device", p.device)
				continue
			}
			w.log.Info("acpi: power button pressed", "transport", p.t.String(), "device", p.device)
			if err := r.Send(ctx, p.notice()); err != nil {
				return err
			}
		}
	}
}

// notice returns the notice for p.
func (p press) notice() termsig.Notice {
	return termsig.Notice{
		Kind:     termsig.Terminate,
		Event:    EventPowerButton,
		Reason:   "power button " + p.device + " (" + p.t.String() + ")",
		Observed: p.at,
		Raw:      p.raw,
	}
}

// A transport delivers presses from one origin: the netlink subscription,
// acpid, or one input device.
type transport interface {
	kind() Transport
	// run reports presses to w until ctx is done, then releases what the
	// transport holds and returns nil. It returns an error when the
	// transport has ended for good. The transport is part i of the
	// source's health: run calls w.health.Looked(i) after its first
	// attempt at its origin (at once if open made it), unless ctx ends
	// first, and reports its failures with w.health.Set(i, err).
	run(ctx context.Context, w *watcher, i int) error
	// close releases what open acquired, for a transport that never runs.
	close()
}

// A press is one report of a power-button press by a transport.
type press struct {
	t      Transport
	device string // bus id or device node
	raw    string
	at     time.Time
}

// A watcher is the state that one Watch shares with its transports.
type watcher struct {
	cfg     Config // with the defaults applied
	log     *slog.Logger
	presses chan press
	// health holds each transport's state, numbered as they were opened:
	// the source reports the error of the one that has failed longest,
	// and is ready once each has made its first attempt.
	health *health.Parts
}

// press hands p to Watch. It returns false if ctx ended first.
func (w *watcher) press(ctx context.Context, p press) bool {
	select {
	case w.presses <- p:
		return true
	case <-ctx.Done():
		return false
	}
}

// ignore logs an event that is not a press, at debug level.
func (w *watcher) ignore(t Transport, why, raw string) {
	w.log.Debug("acpi: event ignored", "transport", t.String(), "why", why, "raw", clip(raw))
}

// A deduper drops the presses that arrive within window of the press that
// last gave a notice. The window is fixed, not sliding, so that a button
// held or pressed again and again still gives a notice every window.
type deduper struct {
	window time.Duration // negative: keep everything
	last   time.Time
	seen   bool
}

func (d *deduper) accept(at time.Time) bool {
	if d.window < 0 {
		return true
	}
	// A press stamped before the last one (transports race) is the same
	// press: at.Sub(d.last) is then negative.
	if d.seen && at.Sub(d.last) < d.window {
		return false
	}
	d.last, d.seen = at, true
	return true
}

package acpi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/termsig/termsig"
)

// Name is the name of the source, in notices and in termsig.Notifier.Status.
const Name = "acpi"

// EventPowerButton is the [termsig.Notice.Event] of every notice of the
// source: a press of the power button.
const EventPowerButton = "power-button"

// Defaults of [Config].
const (
	DefaultAcpidSocket  = "/var/run/acpid.socket"
	DefaultInputDevices = "/dev/input/event*"
	DefaultSysfsRoot    = "/sys"
	DefaultDedupeWindow = 2 * time.Second
	DefaultBackoffBase  = 100 * time.Millisecond
	DefaultBackoffMax   = 5 * time.Second
)

// A Transport is a way the power button reaches user space, or a set of
// them.
type Transport uint8

// The transports. Combine them with |.
const (
	// Netlink is the kernel's generic netlink family acpi_event, multicast
	// group acpi_mc_group.
	Netlink Transport = 1 << iota
	// Acpid is acpid's UNIX socket.
	Acpid
	// Input is the input devices (evdev) that have a KEY_POWER key.
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
// Watch (and [Source.Available]) check the Config first, and Watch returns
// an error that starts "acpi: " and names the field, which a
// [termsig.Notifier] shows as a failed source, if
//
//   - Transports has bits outside AllTransports;
//   - BackoffBase or BackoffMax is negative;
//   - on Linux, for a transport that Transports selects: AcpidSocket is
//     set and is not there or is not a socket, or InputDevices is set and
//     is not a valid glob (see filepath.Match) or matches no file.
//
// The first two are checked on every system; the paths only on Linux,
// where they mean something.
type Config struct {
	// Transports are the transports to use when they are available; zero
	// means AllTransports.
	Transports Transport

	// Root is the directory below which the default places are looked
	// for (DefaultAcpidSocket, DefaultInputDevices, DefaultSysfsRoot);
	// empty means "/". A test, or sources.Detect under a fake root,
	// points it at a directory laid out like "/". Paths set below are
	// used as they are.
	Root string

	// AcpidSocket is the path of acpid's socket; empty means
	// DefaultAcpidSocket, "/var/run/acpid.socket" (below Root), used only
	// if it is there when Watch starts.
	AcpidSocket string

	// InputDevices is a glob of the input device nodes to consider; empty
	// means DefaultInputDevices, "/dev/input/event*" (below Root). Symbolic
	// links (such as /dev/input/by-path/*-event-kbd) are followed.
	InputDevices string

	// SysfsRoot is where sysfs is mounted; empty means DefaultSysfsRoot,
	// "/sys" (below Root). The key capabilities of device eventN are read
	// from SysfsRoot/class/input/eventN/device/capabilities/key and its
	// name from .../device/name.
	SysfsRoot string

	// DedupeWindow is how long after a press that gave a notice further
	// presses are taken for the same one and dropped: one press reaches
	// several transports, and acpid reports it twice. Zero means
	// DefaultDedupeWindow, 2 s; a negative value turns deduplication off,
	// so that every report is a notice.
	DedupeWindow time.Duration

	// BackoffBase and BackoffMax bound the wait before reconnecting to
	// acpid or re-subscribing to netlink after a failure: it starts at
	// BackoffBase and doubles up to BackoffMax (a BackoffMax below
	// BackoffBase is taken as BackoffBase). Zero means DefaultBackoffBase
	// (100 ms) and DefaultBackoffMax (5 s); negative values are an error.
	BackoffBase time.Duration
	BackoffMax  time.Duration

	// Logger receives one line per change of state that is not health
	// (which transports are watched, an input device gone, a press) and,
	// at debug level, the connections made and the events that are
	// ignored. Failures that Watch retries (acpid gone, netlink failing)
	// are not logged here: they are reported with [termsig.ReportError],
	// and the Notifier logs each change. Nil means slog.Default(); pass
	// slog.New(slog.DiscardHandler) to silence it.
	Logger *slog.Logger
}

// A Source reports presses of the ACPI power button as termsig.Terminate
// notices. Create one with [New].
//
// A Source has no state of its own between calls: it may be watched by
// several Notifiers at once, each with its own sockets and files.
type Source struct {
	cfg   Config // with the defaults filled in
	given Config // as given to New: which places were set explicitly
}

// New returns a Source configured by cfg. It checks nothing and opens
// nothing: Watch does.
func New(cfg Config) *Source {
	s := &Source{given: cfg}
	if cfg.Transports == 0 {
		cfg.Transports = AllTransports
	}
	under := func(path string) string {
		if cfg.Root == "" || cfg.Root == "/" {
			return path
		}
		return filepath.Join(cfg.Root, path)
	}
	if cfg.AcpidSocket == "" {
		cfg.AcpidSocket = under(DefaultAcpidSocket)
	}
	if cfg.InputDevices == "" {
		cfg.InputDevices = under(DefaultInputDevices)
	}
	if cfg.SysfsRoot == "" {
		cfg.SysfsRoot = under(DefaultSysfsRoot)
	}
	if cfg.DedupeWindow == 0 {
		cfg.DedupeWindow = DefaultDedupeWindow
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	cfg.BackoffMax = max(cfg.BackoffMax, cfg.BackoffBase)
	s.cfg = cfg
	return s
}

// logger returns the Config's Logger, or slog.Default() if it has none.
func (s *Source) logger() *slog.Logger {
	if s.cfg.Logger != nil {
		return s.cfg.Logger
	}
	return slog.Default()
}

// check returns the error that Watch returns at once for a Config that
// cannot work (see [Config]).
func (s *Source) check() error {
	g := s.given
	if g.Transports&^AllTransports != 0 {
		return fmt.Errorf("acpi: Config.Transports (%v) has bits outside AllTransports", g.Transports)
	}
	if g.BackoffBase < 0 {
		return fmt.Errorf("acpi: Config.BackoffBase is negative (%v); zero means the default", g.BackoffBase)
	}
	if g.BackoffMax < 0 {
		return fmt.Errorf("acpi: Config.BackoffMax is negative (%v); zero means the default", g.BackoffMax)
	}
	return s.checkPaths()
}

// ReportsReady makes Source a [termsig.ReadyReporter] and returns true: its
// first look is quick and local, so termsig.New waits for it. Watch calls
// [termsig.Ready] once it has subscribed to the kernel's netlink family,
// opened the input devices and made its first attempt to connect to
// acpid, whether that worked or not; each is a system call on this host,
// and the connection attempt is bounded (1 s) in case acpid does not
// accept. A press after termsig.New has returned is then not missed by
// the transports that are open: the kernel keeps it until it is read.
func (s *Source) ReportsReady() bool { return true }

// Name returns "acpi".
func (s *Source) Name() string { return Name }

// Available returns the transports that Watch would use if it started now:
// those of Config.Transports that are present on this host. Zero means that
// Watch would return ErrUnavailable. It is quick and local (a netlink
// request to the kernel, a stat, a few sysfs files; no network), so that
// sources.Detect may call it. It returns zero on systems other than Linux.
//
// If the Config cannot work (see [Config]), Available returns the
// transports the Config names without looking, not zero: Watch would fail
// rather than find nothing, and a caller that picks sources with
// Available, such as sources.Detect, should keep the source so that its
// failure shows rather than leave it out quietly.
func (s *Source) Available() Transport {
	if s.check() != nil {
		return s.cfg.Transports
	}
	var t Transport
	for _, tr := range s.open() {
		t |= tr.kind()
		tr.close()
	}
	return t
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
//     [termsig.Ready] (see [Source.ReportsReady]).
//   - One press gives one notice, however many transports report it (see
//     Config.DedupeWindow). Its Event is [EventPowerButton]; its Reason
//     names the device and the transport, such as "power button
//     LNXPWRBN:00 (netlink)"; its Deadline is zero (unknown); Raw is the
//     acpid line, the netlink event in acpid's format, or the input_event
//     record in hex.
//   - Other ACPI events (lid, sleep button, AC adapter, battery, thermal)
//     are not notices: they are logged at debug level.
//   - When acpid goes away, or the netlink subscription fails, Watch
//     reconnects with backoff and reports the failure with
//     termsig.ReportError until it works again; it does not log it
//     itself.
//   - It returns an error other than ctx's only when every transport it
//     used has ended for good, which happens only to input devices (a
//     device removed, a recording read to its end).
//
// Watch returns within milliseconds of ctx being done and leaves no
// goroutine, open socket or file behind.
func (s *Source) Watch(ctx context.Context, out chan<- termsig.Notice) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.watch(ctx, out, s.open())
}

func (s *Source) watch(ctx context.Context, out chan<- termsig.Notice, ts []transport) error {
	if len(ts) == 0 {
		return fmt.Errorf("acpi: no power-button transport (netlink family %s, acpid socket %s, input devices %s with KEY_POWER): %w",
			genlFamily, s.cfg.AcpidSocket, s.cfg.InputDevices, termsig.ErrUnavailable)
	}
	var used Transport
	for _, t := range ts {
		used |= t.kind()
	}
	w := &watcher{s: s, log: s.logger(), presses: make(chan press)}
	w.log.Info("acpi: watching the power button", "transports", used.String())
	// Each transport calls looked after its first attempt; the last one
	// calls termsig.Ready.
	w.unlooked.Store(int32(len(ts)))

	// Buffered for every transport, so that none waits to say it ended.
	ended := make(chan error, len(ts))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, t := range ts {
		wg.Go(func() { ended <- t.run(ctx, w) })
	}

	d := deduper{window: s.cfg.DedupeWindow}
	live := len(ts)
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
			select {
			case out <- p.notice():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// notice returns the notice for p.
func (p press) notice() termsig.Notice {
	return termsig.Notice{
		Source:   Name,
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
	// transport has ended for good. It calls w.looked once, after its
	// first attempt at its origin (at once if open made it), unless ctx
	// ends first.
	run(ctx context.Context, w *watcher) error
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
	s        *Source
	log      *slog.Logger
	presses  chan press
	unlooked atomic.Int32 // transports that have not called looked

	mu   sync.Mutex
	errs [3]error // by transport: netlink, acpid, input
}

// looked tells Watch that a transport has made its first attempt; after
// the last one, the source has had its first look.
func (w *watcher) looked(ctx context.Context) {
	if w.unlooked.Add(-1) == 0 {
		termsig.Ready(ctx)
	}
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

// health records the state of transport t (err nil: it works) and reports
// the failures of all transports together with termsig.ReportError, so
// that one transport recovering does not hide another one's failure.
func (w *watcher) health(ctx context.Context, t Transport, err error) {
	i := 0
	for t > 1 {
		t >>= 1
		i++
	}
	w.mu.Lock()
	defer w.mu.Unlock() // ReportError is called under mu so that reports keep their order
	w.errs[i] = err
	termsig.ReportError(ctx, errors.Join(w.errs[:]...))
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

package acpi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig"
)

// Name is the name of the source, in notices and in termsig.Notifier.Status.
const Name = "acpi"

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
type Config struct {
	// Transports are the transports to use when they are available; zero
	// means AllTransports.
	Transports Transport

	// AcpidSocket is the path of acpid's socket; empty means
	// DefaultAcpidSocket, "/var/run/acpid.socket".
	AcpidSocket string

	// InputDevices is a glob of the input device nodes to consider; empty
	// means DefaultInputDevices, "/dev/input/event*". Symbolic links (such
	// as /dev/input/by-path/*-event-kbd) are followed.
	InputDevices string

	// SysfsRoot is where sysfs is mounted; empty means DefaultSysfsRoot,
	// "/sys". The key capabilities of device eventN are read from
	// SysfsRoot/class/input/eventN/device/capabilities/key and its name
	// from .../device/name.
	SysfsRoot string

	// DedupeWindow is how long after a press that gave a notice further
	// presses are taken for the same one and dropped: one press reaches
	// several transports, and acpid reports it twice. Zero means
	// DefaultDedupeWindow, 2 s; a negative value turns deduplication off,
	// so that every report is a notice.
	DedupeWindow time.Duration

	// BackoffBase and BackoffMax bound the wait before reconnecting to
	// acpid or re-subscribing to netlink after a failure: it starts at
	// BackoffBase and doubles up to BackoffMax. Zero means
	// DefaultBackoffBase (100 ms) and DefaultBackoffMax (5 s).
	BackoffBase time.Duration
	BackoffMax  time.Duration

	// Logger receives one line per change of state (which transports are
	// watched, acpid lost and reconnected, a press) and, at debug level, the
	// events that are ignored. Nil means no logging.
	Logger *slog.Logger
}

// A Source reports presses of the ACPI power button as termsig.Terminate
// notices. Create one with [New].
//
// A Source has no state of its own between calls: it may be watched by
// several Notifiers at once, each with its own sockets and files.
type Source struct {
	cfg Config
	log *slog.Logger
}

// New returns a Source configured by cfg. It opens nothing: Watch does.
func New(cfg Config) *Source {
	if cfg.Transports == 0 {
		cfg.Transports = AllTransports
	}
	if cfg.AcpidSocket == "" {
		cfg.AcpidSocket = DefaultAcpidSocket
	}
	if cfg.InputDevices == "" {
		cfg.InputDevices = DefaultInputDevices
	}
	if cfg.SysfsRoot == "" {
		cfg.SysfsRoot = DefaultSysfsRoot
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
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{cfg: cfg, log: log}
}

// ReportsReady marks Source as a termsig.ReadyReporter: termsig.New
// returns only once Watch has subscribed to the kernel's netlink family
// and opened the input devices (acpid's socket is connected to a moment
// later), so that a press right after New is not missed. It takes well
// under a millisecond.
func (s *Source) ReportsReady() {}

// Name returns "acpi".
func (s *Source) Name() string { return Name }

// Available returns the transports that Watch would use if it started now:
// those of Config.Transports that are present on this host. Zero means that
// Watch would return ErrUnavailable. It is quick and local (a netlink
// request to the kernel, a stat, a few sysfs files; no network), so that
// sources.Detect may call it. It returns zero on systems other than Linux.
func (s *Source) Available() Transport {
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
//   - It uses every transport of Config.Transports that is available when
//     it starts, and returns an error wrapping termsig.ErrUnavailable at
//     once when there is none (on systems other than Linux, always).
//   - One press gives one notice, however many transports report it (see
//     Config.DedupeWindow). Its Reason names the device and the transport,
//     such as "power button LNXPWRBN:00 (netlink)"; its Deadline is zero
//     (unknown); Raw is the acpid line, the netlink event in acpid's
//     format, or the input_event record in hex.
//   - Other ACPI events (lid, sleep button, AC adapter, battery, thermal)
//     are not notices: they are logged at debug level.
//   - When acpid goes away, or the netlink subscription fails, Watch
//     reconnects with backoff and reports the failure with
//     termsig.ReportError until it works again.
//   - It returns an error other than ctx's only when every transport it
//     used has ended for good, which happens only to input devices (a
//     device removed, a recording read to its end).
//
// Watch returns within milliseconds of ctx being done and leaves no
// goroutine, open socket or file behind.
func (s *Source) Watch(ctx context.Context, out chan<- termsig.Notice) error {
	return s.watch(ctx, out, s.open())
}

func (s *Source) watch(ctx context.Context, out chan<- termsig.Notice, ts []transport) error {
	if len(ts) == 0 {
		return fmt.Errorf("acpi: no power-button transport (netlink family %s, acpid socket %s, input devices %s with KEY_POWER): %w",
			genlFamily, s.cfg.AcpidSocket, s.cfg.InputDevices, termsig.ErrUnavailable)
	}
	// The netlink subscription and the input devices are open: the
	// kernel keeps what they report until it is read.
	termsig.Ready(ctx)
	var used Transport
	for _, t := range ts {
		used |= t.kind()
	}
	s.log.Info("acpi: watching the power button", "transports", used.String())

	w := &watcher{s: s, presses: make(chan press)}
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
				s.log.Debug("acpi: same press again, dropped", "transport", p.t.String(), "device", p.device)
				continue
			}
			s.log.Info("acpi: power button pressed", "transport", p.t.String(), "device", p.device)
			n := termsig.Notice{
				Source:   Name,
				Kind:     termsig.Terminate,
				Reason:   "power button " + p.device + " (" + p.t.String() + ")",
				Observed: p.at,
				Raw:      p.raw,
			}
			select {
			case out <- n:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// A transport delivers presses from one origin: the netlink subscription,
// acpid, or one input device.
type transport interface {
	kind() Transport
	// run reports presses to w until ctx is done, then releases what the
	// transport holds and returns nil. It returns an error when the
	// transport has ended for good.
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
	s       *Source
	presses chan press

	mu   sync.Mutex
	errs [3]error // by transport: netlink, acpid, input
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
	w.s.log.Debug("acpi: event ignored", "transport", t.String(), "why", why, "raw", clip(raw))
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

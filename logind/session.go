package logind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
)

// D-Bus error names the watcher tells apart.
const (
	errServiceUnknown    = "org.freedesktop.DBus.Error.ServiceUnknown"
	errNameHasNoOwner    = "org.freedesktop.DBus.Error.NameHasNoOwner"
	errOperationUnderway = "org.freedesktop.login1.OperationInProgress"
)

// errBusLost is the error of a session whose connection ended.
var errBusLost = errors.New("logind: connection to the system bus lost")

// A watcher is one Watch: a session per connection to the bus, with what
// carries over from one to the next.
type watcher struct {
	src *Source
	cfg Config
	out chan<- termsig.Notice

	connected bool // a session connected once: later failures are transient
	hadLogind bool // logind answered once: its absence later is transient
	healthy   bool // the last session got as far as listening

	// Of the current session:
	conn    *dbus.Conn
	filter  *filter
	delay   time.Duration    // InhibitDelayMaxUSec; -1: no bound
	lockErr error            // why the delay lock could not be taken; nil: held
	pending []termsig.Notice // to send, in order
	warned  bool             // a forged signal was logged
}

// session connects, subscribes, takes the lock and hears signals until
// the connection ends (an error) or ctx is done (nil).
func (w *watcher) session(ctx context.Context) error {
	w.healthy, w.warned, w.lockErr = false, false, nil
	w.filter = newFilter()
	conn, err := w.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	w.conn = conn
	w.connected = true
	if err := w.setUp(ctx); err != nil {
		return err
	}
	w.healthy = true
	w.reportLock(ctx)
	termsig.Ready(ctx)
	return w.listen(ctx)
}

// connect dials the bus and says hello, within CallTimeout.
func (w *watcher) connect(ctx context.Context) (*dbus.Conn, error) {
	// WithContext: the connection closes when Watch's ctx ends, which
	// also ends an Auth or Hello stuck on a bus that does not answer.
	conn, err := dbus.Dial(w.cfg.Address, dbus.WithContext(ctx), dbus.WithSignalHandler(w.filter))
	if err != nil {
		if !w.connected && errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("logind: no system bus: %w: %w", err, termsig.ErrUnavailable)
		}
		return nil, fmt.Errorf("logind: system bus: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	closed := context.AfterFunc(tctx, func() { conn.Close() })
	err = conn.Auth(nil)
	if err == nil {
		err = conn.Hello()
	}
	if !closed() {
		err = fmt.Errorf("no answer in %v", w.cfg.CallTimeout)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("logind: system bus: handshake: %w", err)
	}
	return conn, nil
}

// setUp subscribes to logind's signals, takes the delay lock, learns
// logind's unique name and settings, and catches up with a shutdown that
// began or was cancelled while the source was not connected.
func (w *watcher) setUp(ctx context.Context) error {
	if err := w.subscribe(ctx); err != nil {
		return err
	}
	// The lock first: the call starts logind if it is not running yet.
	if err := w.takeLock(ctx); err != nil {
		return err
	}
	var owner string
	if err := w.call(ctx, w.conn.BusObject(), "org.freedesktop.DBus.GetNameOwner", busName).Store(&owner); err != nil {
		return w.logindErr(err)
	}
	w.filter.setOwner(owner)
	w.hadLogind = true
	w.delay = DefaultInhibitDelay
	var v dbus.Variant
	logind := w.conn.Object(busName, objPath)
	if err := w.call(ctx, logind, "org.freedesktop.DBus.Properties.Get", iface, "InhibitDelayMaxUSec").Store(&v); err == nil {
		if usec, ok := v.Value().(uint64); ok {
			w.delay = delayOf(usec)
		}
	}
	var preparing bool
	if err := w.call(ctx, logind, "org.freedesktop.DBus.Properties.Get", iface, "PreparingForShutdown").Store(&v); err != nil {
		return fmt.Errorf("logind: PreparingForShutdown: %w", err)
	}
	preparing, _ = v.Value().(bool)
	// Signals that came before the answer are older than it: act on them
	// first, then on what the answer says that no signal told.
	w.drain(ctx)
	w.catchUp(ctx, preparing)
	return nil
}

// subscribe asks the bus for logind's shutdown signals and for changes of
// logind's owner.
func (w *watcher) subscribe(ctx context.Context) error {
	tctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	err := w.conn.AddMatchSignalContext(tctx,
		dbus.WithMatchSender(busName), dbus.WithMatchObjectPath(objPath), dbus.WithMatchInterface(iface))
	if err == nil {
		err = w.conn.AddMatchSignalContext(tctx,
			dbus.WithMatchSender(busDaemon), dbus.WithMatchObjectPath(busPath),
			dbus.WithMatchInterface(busDaemon), dbus.WithMatchMember("NameOwnerChanged"), dbus.WithMatchArg(0, busName))
	}
	if err != nil {
		return fmt.Errorf("logind: subscribe: %w", err)
	}
	return nil
}

// catchUp reconciles what the source believes with PreparingForShutdown.
func (w *watcher) catchUp(ctx context.Context, preparing bool) {
	switch under := w.src.underway(); {
	case preparing && !under:
		// Begun before the source subscribed: no signal is coming, and
		// logind refused a new lock.
		reason := "shutdown already under way when the source connected to logind (no delay lock)"
		if w.src.holding() {
			reason = "shutdown already under way when the source connected to logind, delay lock held"
		}
		n := noticeOf("", time.Now(), w.delay, reason)
		if w.src.begin(n) {
			w.pending = append(w.pending, n)
		}
	case !preparing && under:
		w.cancelled(ctx)
	}
}

// takeLock takes a delay lock for shutdown, unless a shutdown is under
// way (logind refuses one then, and the one held, if any, is kept). It
// returns an error only for a failure of the bus or logind's absence; a
// refusal by logind is kept in lockErr, and the source hears shutdowns
// without holding them.
func (w *watcher) takeLock(ctx context.Context) error {
	if w.src.underway() {
		return nil
	}
	var fd dbus.UnixFD
	err := w.call(ctx, w.conn.Object(busName, objPath), iface+".Inhibit", "shutdown", w.cfg.Who, w.cfg.Why, "delay").Store(&fd)
	var de dbus.Error
	switch {
	case err == nil:
		w.src.setLock(os.NewFile(uintptr(fd), "logind delay lock"))
		w.lockErr = nil
	case errors.As(err, &de) && de.Name == errOperationUnderway:
		// A shutdown has begun: PreparingForShutdown, read next, or the
		// signal on its way says which.
	case errors.As(err, &de) && de.Name != errServiceUnknown && de.Name != errNameHasNoOwner:
		if w.lockErr == nil {
			w.cfg.Logger.Warn("logind: delay lock refused; shutdowns are heard but not held", "err", err)
		}
		w.lockErr = fmt.Errorf("logind: no delay lock: %w", err)
	default:
		return w.logindErr(err)
	}
	return nil
}

// logindErr is the error of a call that failed because logind is not on
// the bus (unavailable, unless it was there before) or for another reason.
func (w *watcher) logindErr(err error) error {
	var de dbus.Error
	if errors.As(err, &de) && (de.Name == errServiceUnknown || de.Name == errNameHasNoOwner) {
		if !w.hadLogind {
			return fmt.Errorf("logind: systemd-logind is not on the system bus (%s): %w", de.Name, termsig.ErrUnavailable)
		}
		return fmt.Errorf("logind: systemd-logind left the system bus (%s)", de.Name)
	}
	return fmt.Errorf("logind: %w", err)
}

// call calls method on obj within CallTimeout.
func (w *watcher) call(ctx context.Context, obj dbus.BusObject, method string, args ...any) *dbus.Call {
	tctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	return obj.CallWithContext(tctx, method, 0, args...)
}

// reportLock shows in the Notifier's Status whether the lock is held.
func (w *watcher) reportLock(ctx context.Context) {
	if w.lockErr != nil {
		termsig.ReportError(ctx, w.lockErr)
	} else {
		termsig.ReportHealthy(ctx)
	}
}

// listen hears signals and sends notices until the connection ends or
// ctx is done. It reads signals while a notice waits for the consumer, so
// that the filter's queue stays short.
func (w *watcher) listen(ctx context.Context) error {
	for {
		var out chan<- termsig.Notice
		var next termsig.Notice
		if len(w.pending) > 0 {
			out, next = w.out, w.pending[0]
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.conn.Context().Done():
			return errBusLost
		case out <- next:
			w.pending = w.pending[1:]
		case <-w.filter.wake:
			w.drain(ctx)
		}
	}
}

// drain acts on the signals the filter has queued.
func (w *watcher) drain(ctx context.Context) {
	for _, sig := range w.filter.take() {
		w.handle(ctx, sig)
	}
	w.warnForged()
}

// handle acts on one signal that passed the filter.
func (w *watcher) handle(ctx context.Context, sig *dbus.Signal) {
	if sig.Name == nameOwnerChanged {
		w.ownerChanged(ctx, sig)
		return
	}
	if !w.filter.ownerIs(sig.Sender) {
		w.filter.forgery(sig.Sender)
		return
	}
	s, err := parseShutdown(sig)
	if err != nil {
		return // logind's, but malformed: nothing to trust in it
	}
	if !s.active {
		w.cancelled(ctx)
		return
	}
	reason := "systemd-logind announced the shutdown, delay lock held"
	if !w.src.holding() {
		reason = "systemd-logind announced the shutdown (no delay lock)"
	}
	if n := noticeOf(s.typ, time.Now(), w.delay, reason); w.src.begin(n) {
		w.pending = append(w.pending, n)
	}
}

// cancelled handles the end of a shutdown that did not happen: a Cleared
// notice, and a lock for the next one.
func (w *watcher) cancelled(ctx context.Context) {
	n, ok := w.src.end()
	if !ok {
		return
	}
	w.pending = append(w.pending, termsig.Notice{
		Source: Name, Kind: termsig.Cleared, Event: n.Event,
		Reason: "systemd-logind cancelled the shutdown", Observed: time.Now(),
	})
	if !w.src.holding() {
		w.relock(ctx)
	}
}

// relock takes a new lock outside setUp: a failure of the bus shows when
// the connection ends, a refusal in Status.
func (w *watcher) relock(ctx context.Context) {
	if err := w.takeLock(ctx); err != nil {
		w.lockErr = err
	}
	w.reportLock(ctx)
}

// ownerChanged follows logind leaving and coming back: only the new owner
// is believed, and a new logind gets a new lock.
func (w *watcher) ownerChanged(ctx context.Context, sig *dbus.Signal) {
	if len(sig.Body) != 3 {
		return
	}
	name, _ := sig.Body[0].(string)
	owner, ok := sig.Body[2].(string)
	if name != busName || !ok {
		return
	}
	w.filter.setOwner(owner)
	if owner != "" {
		w.relock(ctx)
	}
}

// warnForged logs, once per session, that shutdown signals came from a
// process other than logind (and were ignored).
func (w *watcher) warnForged() {
	if w.warned || w.filter.forged.Load() == 0 {
		return
	}
	w.warned = true
	w.cfg.Logger.Warn("logind: ignored shutdown signals that logind did not send", "sender", *w.filter.lastForger.Load())
}

package logind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
)

// errNoUnixSocket is why no lock is held on a bus reached over TCP only:
// a descriptor cannot cross it.
var errNoUnixSocket = errors.New("logind: no delay lock: the bus's address has no UNIX socket, which a lock's descriptor needs")

// takeLock takes a delay lock for shutdown, unless a shutdown is under way
// (logind refuses one then, and the one held, if any, is kept) or none is
// wanted. It returns an error for a failure of the bus or logind's
// absence; a refusal by logind is kept in lockErr, and the source hears
// shutdowns without holding them.
func (w *watcher) takeLock(ctx context.Context) error {
	w.needLock = false
	if w.cfg.NoLock || w.src.underway() {
		return nil
	}
	f, err := w.inhibit(ctx)
	var de dbus.Error
	switch {
	case err == nil:
		w.src.setLock(f)
		w.lockErr = nil
	case errors.Is(err, errNoUnixSocket):
		w.refused(err)
	case errors.As(err, &de) && de.Name == errOperationUnderway:
		// A shutdown has begun: PreparingForShutdown, read next, or the
		// signal on its way says which.
	case errors.As(err, &de) && de.Name != errServiceUnknown && de.Name != errNameHasNoOwner:
		w.refused(fmt.Errorf("logind: no delay lock: %w", err))
	default:
		return w.logindErr(err)
	}
	return nil
}

// refused records and logs (once per text) that logind refused the lock.
func (w *watcher) refused(err error) {
	w.lockErr = err
	if err.Error() != w.warnedLock {
		w.warnedLock = err.Error()
		w.cfg.Logger.Warn("logind: delay lock refused; shutdowns are heard but not held", "err", err)
	}
}

// inhibit calls Inhibit on a connection of its own, which can take a
// descriptor and is closed after the call: a reply that comes after the
// call gave up then finds no connection, and the bus closes the
// descriptor it carried, instead of leaving a lock that nobody holds a
// handle to. The connection is to a UNIX socket of the address only.
func (w *watcher) inhibit(ctx context.Context) (*os.File, error) {
	var entries []string
	for _, ep := range w.eps {
		if ep.network == "unix" {
			entries = append(entries, ep.entry)
		}
	}
	if len(entries) == 0 {
		return nil, errNoUnixSocket
	}
	tctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	// Dial to a UNIX socket does not wait: it connects or fails at once.
	conn, err := dbus.Dial(strings.Join(entries, ";"), dbus.WithContext(tctx))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := handshake(tctx, conn); err != nil {
		return nil, fmt.Errorf("handshake: %w", err)
	}
	var fd dbus.UnixFD
	err = conn.Object(busName, objPath).CallWithContext(tctx, iface+".Inhibit", 0, "shutdown", w.cfg.Who, w.cfg.Why, "delay").Store(&fd)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "logind delay lock"), nil
}

// logindErr is the error of a call that failed because logind is not on
// the bus (unavailable, unless it was there before) or for another reason.
func (w *watcher) logindErr(err error) error {
	var de dbus.Error
	if errors.As(err, &de) && (de.Name == errServiceUnknown || de.Name == errNameHasNoOwner) {
		if !w.hadLogind {
			return fmt.Errorf("logind: systemd-logind is not on the system bus (%s): %w", de.Name, termsig.ErrUnavailable)
		}
		return fmt.Errorf("%w (%s)", errLogindGone, de.Name)
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

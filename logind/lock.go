package logind

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
)

// drainWait bounds how long an abandoned Inhibit call waits for its
// connection to read what the bus had already sent it.
const drainWait = time.Second

// errNoUnixSocket is why no lock is held on a bus reached over TCP only:
// a descriptor cannot cross it.
var errNoUnixSocket = errors.New("logind: no delay lock: the bus's address has no UNIX socket, which a lock's descriptor needs")

// takeLock takes a delay lock for shutdown, unless a shutdown is under way
// (logind refuses one then, and the one held, if any, is kept) or none is
// wanted. It returns an error only when logind is not on the bus (see
// logindErr). Any other failure (logind refuses, does not answer, answers
// something else; the lock's own connection fails) is kept in lockErr
// and the lock is tried again later: the source hears shutdowns
// meanwhile, without holding them.
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
		w.hadLogind = true
	case errors.Is(err, errNoUnixSocket):
		w.refused(err)
	case errors.As(err, &de) && de.Name == errOperationUnderway:
		// A shutdown has begun: PreparingForShutdown, read next, or the
		// signal on its way says which.
		w.hadLogind = true
	case errors.As(err, &de) && (de.Name == errServiceUnknown || de.Name == errNameHasNoOwner):
		return w.logindErr(err)
	default:
		w.refused(fmt.Errorf("logind: no delay lock: %w", err))
		w.retryLock = true
	}
	return nil
}

// refused records and logs (once per text) that no lock could be had.
func (w *watcher) refused(err error) {
	w.lockErr = err
	if err.Error() != w.warnedLock {
		w.warnedLock = err.Error()
		w.cfg.Logger.Warn("logind: no delay lock; shutdowns are heard but not held", "err", err)
	}
}

// inhibit calls Inhibit on a connection of its own, which can take a
// descriptor and is closed after the call, to a UNIX socket of the
// address. The call is not abandoned while an answer may be half read:
// when ctx ends, the connection is shut for reading first, so that godbus
// reads to its end what the bus had already sent (an answer and its
// descriptor, closed here) and then fails the call; an answer the bus had
// not sent yet is never sent, and its descriptor dies with the bus's end
// of the connection. (Closing the connection at once could cut a message
// whose descriptor godbus had already taken in with its first bytes, and
// nobody would close that one.) Descriptors that arrive on the connection
// in anything but the answer (a signal some process sends it) are closed
// as they come.
func (w *watcher) inhibit(ctx context.Context) (*os.File, error) {
	var eps []endpoint
	for _, ep := range w.eps {
		if ep.network == "unix" {
			eps = append(eps, ep)
		}
	}
	if len(eps) == 0 {
		return nil, errNoUnixSocket
	}
	tctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	uc, err := dialUnix(eps)
	if err != nil {
		return nil, err
	}
	conn, err := dialUnixConn(uc, dbus.WithIncomingInterceptor(closeStrayFDs))
	if err != nil {
		uc.Close()
		return nil, err
	}
	defer conn.Close()
	if err := handshake(tctx, conn); err != nil {
		return nil, fmt.Errorf("handshake: %w", err)
	}
	done := make(chan *dbus.Call, 1)
	call := conn.Object(busName, objPath).Go(iface+".Inhibit", 0, done, "shutdown", w.cfg.Who, w.cfg.Why, "delay")
	select {
	case <-call.Done:
	case <-tctx.Done():
		uc.CloseRead()
		drained := time.NewTimer(drainWait)
		select {
		case <-call.Done:
		case <-drained.C:
			// The bus sent part of a message and not the rest: what it
			// carried is lost either way.
			conn.Close()
			<-call.Done
		}
		drained.Stop()
		closeFDs(call.Body)
		return nil, fmt.Errorf("no answer: %w", context.Cause(tctx))
	}
	if call.Err != nil {
		closeFDs(call.Body)
		return nil, call.Err
	}
	var fd dbus.UnixFD
	if err := call.Store(&fd); err != nil || len(call.Body) != 1 {
		closeFDs(call.Body)
		return nil, fmt.Errorf("the answer to Inhibit is %q, not a descriptor", dbus.SignatureOf(call.Body...).String())
	}
	return os.NewFile(uintptr(fd), "logind delay lock"), nil
}

// dialUnix connects to the first of eps that answers. A UNIX socket's
// connect does not wait: it connects or fails at once.
func dialUnix(eps []endpoint) (*net.UnixConn, error) {
	var err error
	for _, ep := range eps {
		var uc *net.UnixConn
		uc, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: ep.addr, Net: "unix"})
		if err == nil {
			return uc, nil
		}
	}
	return nil, err
}

// closeStrayFDs closes the descriptors of a message that is not a reply
// (a signal or a call some process sends the lock's connection): nothing
// reads them.
func closeStrayFDs(msg *dbus.Message) {
	if msg.Type == dbus.TypeSignal || msg.Type == dbus.TypeMethodCall {
		closeFDs(msg.Body)
	}
}

// closeFDs closes the descriptors among values, a message's body.
func closeFDs(values []any) {
	for _, v := range values {
		switch fd := v.(type) {
		case dbus.UnixFD:
			syscallClose(int(fd))
		case []dbus.UnixFD:
			for _, f := range fd {
				syscallClose(int(f))
			}
		}
	}
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

// call calls method on obj within RequestTimeout.
func (w *watcher) call(ctx context.Context, obj dbus.BusObject, method string, args ...any) *dbus.Call {
	tctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	return obj.CallWithContext(tctx, method, 0, args...)
}

// reportLock shows in the Notifier's Status whether logind is there and
// the lock is held.
func (w *watcher) reportLock() {
	switch {
	case w.filter.gone():
		w.run.Report(errLogindGone)
	case w.lockErr != nil:
		w.run.Report(w.lockErr)
	default:
		w.run.Report(nil)
	}
}

// listWait bounds ListInhibitors when logind announces a shutdown that the
// source does not hold: the notice waits for the answer.
const listWait = 500 * time.Millisecond

// othersDelay returns the delay before the Deadline of a shutdown that the
// source does not hold, and the notice's Reason. logind waits for delay
// locks only: with none held by anyone it goes on at once (0), with some
// it waits up to InhibitDelayMaxSec (w.delay). When ListInhibitors fails
// or does not answer within listWait, the delay is 0 as well: a Deadline
// later than logind's would promise time it may not give, so the unknown
// wait is taken as none (as catchUp does), and the failure is logged
// (once per text).
func (w *watcher) othersDelay(ctx context.Context) (time.Duration, string) {
	held, err := w.delayHeld(ctx)
	switch {
	case err != nil:
		if err.Error() != w.warnedList {
			w.warnedList = err.Error()
			w.cfg.Logger.Warn("logind: cannot tell whether a delay lock holds the shutdown; its Deadline is now", "err", err)
		}
		return 0, "systemd-logind announced the shutdown (no delay lock; whether another process holds one is unknown)"
	case held:
		return w.delay, "systemd-logind announced the shutdown (no delay lock; another process holds one)"
	}
	return 0, "systemd-logind announced the shutdown (no delay lock held by anyone: it goes on at once)"
}

// An inhibitor is one entry of ListInhibitors' a(ssssuu).
type inhibitor struct {
	What, Who, Why, Mode string
	UID, PID             uint32
}

// delayHeld reports whether anyone holds a delay lock for shutdown, as
// ListInhibitors says: mode "delay", "shutdown" among the what.
func (w *watcher) delayHeld(ctx context.Context) (bool, error) {
	tctx, cancel := context.WithTimeout(ctx, min(w.cfg.RequestTimeout, listWait))
	defer cancel()
	var inhs []inhibitor
	if err := w.conn.Object(busName, objPath).CallWithContext(tctx, iface+".ListInhibitors", 0).Store(&inhs); err != nil {
		return false, fmt.Errorf("logind: ListInhibitors: %w", err)
	}
	return slices.ContainsFunc(inhs, func(i inhibitor) bool {
		return i.Mode == "delay" && slices.Contains(strings.Split(i.What, ":"), "shutdown")
	}), nil
}

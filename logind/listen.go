package logind

import (
	"context"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
)

// listen hears signals and sends notices until the connection ends (an
// error) or ctx is done (nil). It reads signals while a notice waits for
// the consumer, so that the filter's queue stays short; takes a new lock
// after a cancelled shutdown once the Cleared notice is handed over, and
// again after a backoff when the last try failed; and meets a new logind
// on the same connection.
func (w *watcher) listen(ctx context.Context) error {
	bo := backoff.Backoff{Base: w.cfg.backoff, Max: w.cfg.maxBackoff, Jitter: true}
	retry := time.NewTimer(0)
	<-retry.C
	defer retry.Stop()
	for {
		if w.renew {
			if err := w.meet(ctx); err != nil {
				return err
			}
			w.reportLock(ctx)
		}
		if w.needLock && len(w.pending) == 0 {
			if err := w.takeLock(ctx); err != nil {
				return err
			}
			w.reportLock(ctx)
		}
		if w.retryLock {
			w.retryLock = false
			retry.Reset(bo.Next())
		} else if w.lockErr == nil {
			bo.Reset()
		}
		out, next := w.next()
		select {
		case <-ctx.Done():
			return nil
		case <-w.conn.Context().Done():
			w.drain(ctx) // what came before the end still counts
			return errBusLost
		case out <- next:
			w.pending = w.pending[1:]
		case <-retry.C:
			w.needLock = true
		case <-w.filter.wake:
			w.drain(ctx)
		}
	}
}

// next returns the channel to send the first pending notice on, and the
// notice; a nil channel (which a select never sends on) if none is
// pending.
func (w *watcher) next() (chan<- termsig.Notice, termsig.Notice) {
	if len(w.pending) == 0 {
		return nil, termsig.Notice{}
	}
	return w.out, w.pending[0]
}

// flush hands over the pending notices, and returns an error if the
// connection ends meanwhile.
func (w *watcher) flush(ctx context.Context) error {
	for len(w.pending) > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-w.conn.Context().Done():
			return errBusLost
		case w.out <- w.pending[0]:
			w.pending = w.pending[1:]
		}
	}
	return nil
}

// wait waits d, handing over the pending notices meanwhile, and returns
// false if ctx ends first.
func (w *watcher) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		out, next := w.next()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case out <- next:
			w.pending = w.pending[1:]
		}
	}
}

// drain acts on the signals the filter has queued, in order.
// When a new logind takes the name, the signals after that one are put
// back, to be acted on once the new logind is met (with its delay).
func (w *watcher) drain(ctx context.Context) {
	qs := w.filter.take()
	for i, q := range qs {
		w.handle(ctx, q)
		if w.renew {
			w.filter.requeue(qs[i+1:])
			break
		}
	}
	w.warnForged()
}

// handle acts on one signal that passed the filter.
func (w *watcher) handle(ctx context.Context, q queued) {
	sig := q.sig
	if sig.Name == nameOwnerChanged {
		w.ownerChanged(ctx, sig)
		return
	}
	if q.verdict == 0 && (w.owner == "" || sig.Sender != w.owner) {
		w.filter.forgery(sig.Sender) // came before logind's name was known
		return
	}
	s, err := parseShutdown(sig)
	if err != nil {
		return // logind's, but malformed: nothing to trust in it
	}
	if !s.active {
		w.cancelled()
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
// notice, and a lock for the next one once it is handed over.
func (w *watcher) cancelled() {
	n, ok := w.src.end()
	if !ok {
		return
	}
	w.pending = append(w.pending, termsig.Notice{
		Source: Name, Kind: termsig.Cleared, Event: n.Event,
		Reason: "systemd-logind cancelled the shutdown", Observed: time.Now(),
	})
	w.needLock = !w.src.holding()
}

// ownerChanged follows logind leaving and coming back: while it is gone
// nobody's shutdown signals are believed and Status says so; a new logind
// is met afresh (its settings, its state, a lock from it) before anything
// else is done.
func (w *watcher) ownerChanged(ctx context.Context, sig *dbus.Signal) {
	owner, ok := newOwner(sig)
	if !ok || owner == w.owner {
		return
	}
	w.owner = owner
	if owner == "" {
		termsig.ReportError(ctx, errLogindGone)
		return
	}
	w.renew = true
}

// warnForged logs, once per session, that shutdown signals came from a
// process other than logind (and were ignored).
func (w *watcher) warnForged() {
	if w.warned || w.filter.forged.Load() == 0 {
		return
	}
	w.warned = true
	w.cfg.Logger.Warn("logind: ignored shutdown signals that logind did not send", "sender", *w.filter.lastForger.Load())
	if n := w.filter.droppedCount(); n > 0 {
		w.cfg.Logger.Warn("logind: dropped signals that came before logind's name was known", "dropped", n)
	}
}

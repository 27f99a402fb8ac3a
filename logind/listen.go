package logind

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
)

// listen hears signals and sends notices until the connection ends (an
// error) or ctx is done (nil). The sender hands the notices over, so that
// listen reads signals while one waits for the consumer, and the filter's
// queue stays short; listen takes a new lock after a cancelled shutdown
// once the Cleared notice is handed over, and again after a backoff when
// the last try failed; reads ScheduledShutdown every ScheduledInterval
// and when logind says it changed; and meets a new logind on the same
// connection.
func (w *watcher) listen(ctx context.Context) error {
	bo := backoff.Backoff{Base: w.cfg.backoff, Max: w.cfg.maxBackoff, Jitter: true}
	retry := time.NewTimer(0)
	<-retry.C
	defer retry.Stop()
	sched := time.NewTimer(w.cfg.ScheduledInterval)
	defer sched.Stop()
	defer w.stopPoll()
	for {
		if w.renew {
			if err := w.meet(ctx); err != nil {
				return err
			}
			w.reportLock()
		}
		if w.needLock && w.send.idle() {
			if err := w.takeLock(ctx); err != nil {
				return err
			}
			w.reportLock()
		}
		if w.retryLock {
			w.retryLock = false
			retry.Reset(bo.Next())
		} else if w.lockErr == nil {
			bo.Reset()
		}
		if w.pollNow && w.poll == nil {
			w.pollNow = false
			w.startPoll(ctx)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.conn.Context().Done():
			w.drain(ctx) // what came before the end still counts
			return errBusLost
		case <-w.send.handed:
		case <-retry.C:
			w.needLock = true
		case <-sched.C:
			w.pollNow = true
		case call := <-w.polled:
			w.endPoll(ctx, call)
			sched.Reset(w.cfg.ScheduledInterval)
		case <-w.filter.wake:
			w.drain(ctx)
		}
	}
}

// flush waits until the pending notices are handed over, and returns an
// error if the connection ends meanwhile.
func (w *watcher) flush(ctx context.Context) error {
	for !w.send.idle() {
		select {
		case <-ctx.Done():
			return nil
		case <-w.conn.Context().Done():
			return errBusLost
		case <-w.send.handed:
		}
	}
	return nil
}

// A sender hands notices over to the Notifier in order, on a goroutine of
// its own that Watch waits for before it returns. Run.Send blocks while a
// slow consumer leaves C full, and the watcher must go on meanwhile: read
// what the filter queues (a bounded queue, which a flood would fill), see
// the bus go, reconnect and back off; at the end of a shutdown the bus may
// never come back, and the notices seen before must still be handed over.
// A Send whose ctx also ended with the connection would see the bus go,
// but read no signal while it waited. The queue outlives sessions.
type sender struct {
	run    *termsig.Run
	queued chan struct{} // capacity 1: a notice was queued
	handed chan struct{} // capacity 1: a notice was handed over

	mu      sync.Mutex
	pending []termsig.Notice // pending[0] is being sent
}

func newSender(r *termsig.Run) *sender {
	return &sender{run: r, queued: make(chan struct{}, 1), handed: make(chan struct{}, 1)}
}

// push queues n; it never blocks. The advice of a scheduled shutdown
// replaces the one of the same Event still waiting behind the notice
// being sent: only the latest schedule matters, and a consumer that does
// not read must not make the queue grow with every change of it.
func (s *sender) push(n termsig.Notice) {
	s.mu.Lock()
	if isSchedule(n) && len(s.pending) > 1 {
		s.pending = append(s.pending[:1], slices.DeleteFunc(s.pending[1:], func(p termsig.Notice) bool {
			return isSchedule(p) && p.Event == n.Event
		})...)
	}
	s.pending = append(s.pending, n)
	s.mu.Unlock()
	poke(s.queued)
}

// isSchedule reports whether n is about a scheduled shutdown: its advice,
// or the Cleared that withdraws it.
func isSchedule(n termsig.Notice) bool {
	return n.Event == EventScheduled || strings.HasPrefix(n.Event, EventScheduled+"/")
}

// idle reports whether every notice pushed has been handed over.
func (s *sender) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) == 0
}

// loop sends the notices pushed until ctx is done. Watch runs it, and
// waits for it before it returns.
func (s *sender) loop(ctx context.Context) {
	for {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-s.queued:
			}
			continue
		}
		n := s.pending[0]
		s.mu.Unlock()
		if s.run.Send(ctx, n) != nil {
			return // ctx is done: Watch is returning
		}
		s.mu.Lock()
		s.pending = s.pending[1:]
		s.mu.Unlock()
		poke(s.handed)
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
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
		w.ownerChanged(sig)
		return
	}
	if q.verdict == 0 && (w.owner == "" || sig.Sender != w.owner) {
		w.filter.forgery(sig.Sender) // came before logind's name was known
		return
	}
	if sig.Name == propertiesChanged {
		w.pollNow = true // ScheduledShutdown changed: read it
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
	if w.src.underway() {
		return // logind's second signal of the shutdown
	}
	now := time.Now()
	delay, reason := w.delay, "systemd-logind announced the shutdown, delay lock held"
	if !w.src.holding() {
		delay, reason = w.othersDelay(ctx)
	}
	if n := noticeOf(s.typ, now, delay, reason); w.src.begin(n) {
		w.send.push(n)
	}
}

// cancelled handles the end of a shutdown that did not happen: a Cleared
// notice, and a lock for the next one once it is handed over.
func (w *watcher) cancelled() {
	n, ok := w.src.end()
	if !ok {
		return
	}
	w.send.push(termsig.Notice{
		Kind: termsig.Cleared, Event: n.Event,
		Reason: "systemd-logind cancelled the shutdown", Observed: time.Now(),
	})
	w.needLock = !w.src.holding()
}

// ownerChanged follows logind leaving and coming back: while it is gone
// nobody's shutdown signals are believed and Status says so; a new logind
// is met afresh (its settings, its state, a lock from it) before anything
// else is done.
func (w *watcher) ownerChanged(sig *dbus.Signal) {
	owner, ok := newOwner(sig)
	if !ok || owner == w.owner {
		return
	}
	w.owner = owner
	if owner == "" {
		w.run.Report(errLogindGone)
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

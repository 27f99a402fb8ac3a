package asg

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/internal/backoff"
)

// retryBase returns the first wait before a call on h is tried again: a
// tenth of its heartbeat timeout, at most 1 s.
func (c Config) retryBase(h hook) time.Duration {
	if c.backoffBase > 0 {
		return c.backoffBase
	}
	return min(h.heartbeat/10, time.Second)
}

// A watcher is one Watch of a Source.
type watcher struct {
	s     *Source
	cfg   Config
	r     *termsig.Run
	inner *termsig.Notifier // package imds's source, on the lifecycle state only

	apiErr error // the last failure of the API or of the clients, nil once one works

	// The scale-in, once seen.
	seen   termsig.Notice // imds's notice of it
	phase  phase
	start  time.Time // when the instance began to wait
	limit  time.Time // HoldLimit
	sent   termsig.Notice
	beats  []beat // one per hook that holds the instance
	retry  backoff.Backoff
	failed error // the last heartbeat's failure, while heartbeats fail

	// The first look at the group, before any scale-in.
	met     bool
	meetOff backoff.Backoff
	meetAt  time.Time
}

// A phase is where a watcher is with the scale-in.
type phase uint8

const (
	idle    phase = iota // no scale-in
	seeking              // a scale-in, and the hold not had yet
	holding              // heartbeats keep the hold
	over                 // nothing more to do: no hold, released, lapsed or at its limit
)

// A beat is one hook's hold.
type beat struct {
	hook hook
	end  time.Time // when its action times out, from the last heartbeat it took
	next time.Time // when the next heartbeat is due
	off  *backoff.Backoff
}

// newBeat returns the beat of h, whose heartbeats are tried again within
// a sixth of its timeout.
func (w *watcher) newBeat(h hook) beat {
	return beat{hook: h, off: &backoff.Backoff{Base: w.cfg.retryBase(h), Max: h.heartbeat / 6, Jitter: true}}
}

// close closes the clients' idle connections: Release made after Watch
// opens new ones.
func (w *watcher) close() {
	w.s.mu.Lock()
	cl := w.s.cl
	w.s.mu.Unlock()
	if cl != nil {
		cl.release()
	}
}

func (w *watcher) run(ctx context.Context) {
	select {
	case <-w.inner.Ready():
	case <-ctx.Done():
		return
	}
	w.drain(ctx)
	w.r.Ready()
	w.meetAt = time.Now()
	w.meetOff = backoff.Backoff{Base: time.Second, Max: w.cfg.MaxBackoff, Jitter: true}
	status := time.NewTicker(time.Second)
	defer status.Stop()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		w.report()
		if next, ok := w.due(); ok {
			timer.Reset(time.Until(next))
		} else {
			timer.Stop()
		}
		select {
		case nt := <-w.inner.C():
			w.notice(ctx, nt)
		case <-timer.C:
			w.work(ctx)
		case <-status.C:
		case <-ctx.Done():
			return
		}
	}
}

// drain handles the notices that imds's first look sent.
func (w *watcher) drain(ctx context.Context) {
	for {
		select {
		case nt := <-w.inner.C():
			w.notice(ctx, nt)
		default:
			return
		}
	}
}

// report shows the first failure of the API and of IMDS in Status.
func (w *watcher) report() {
	err := w.apiErr
	if err == nil {
		err = w.failed
	}
	if err == nil {
		if st := w.inner.Status(); len(st) == 1 {
			err = st[0].Err
		}
	}
	w.r.Report(err)
}

// due returns when the watcher has work next.
func (w *watcher) due() (time.Time, bool) {
	switch w.phase {
	case idle:
		if !w.met {
			return w.meetAt, true
		}
	case seeking:
		return w.meetAt, true
	case holding:
		var next time.Time
		for _, b := range w.beats {
			if !b.next.IsZero() && (next.IsZero() || b.next.Before(next)) {
				next = b.next
			}
		}
		if next.IsZero() {
			// No heartbeat can move the hold further: wake at its end.
			return w.deadline(), true
		}
		return next, true
	}
	return time.Time{}, false
}

// work does what is due.
func (w *watcher) work(ctx context.Context) {
	switch w.phase {
	case idle:
		w.meet(ctx)
	case seeking:
		w.seek(ctx)
	case holding:
		w.beat(ctx)
	}
}

// meet has the first look at the group before any scale-in, so that a
// role that may not describe it shows at once in Status: only when IMDS
// says the instance is in a group, so that an instance in none asks the
// API nothing.
func (w *watcher) meet(ctx context.Context) {
	err := w.meetOnce(ctx)
	w.apiErr = err
	if err != nil {
		w.meetAt = time.Now().Add(w.meetOff.Next())
		return
	}
	w.met = true
}

func (w *watcher) meetOnce(ctx context.Context) error {
	cl, err := w.s.clients(ctx, w.cfg)
	if err != nil {
		return err
	}
	state, err := cl.lifecycleState(ctx, w.cfg.RequestTimeout)
	if err != nil || state == "" {
		return err
	}
	_, group, err := w.s.where(ctx, w.cfg, cl)
	if err != nil || group == "" {
		return err
	}
	_, _, err = cl.hooks(ctx, w.cfg.RequestTimeout, group)
	return err
}

// notice handles a notice of imds's.
func (w *watcher) notice(ctx context.Context, nt termsig.Notice) {
	if nt.Kind != termsig.Terminate || w.phase != idle {
		return
	}
	w.seen = nt
	w.s.mu.Lock()
	w.s.scaled = true
	w.s.mu.Unlock()
	w.phase = seeking
	w.retry = backoff.Backoff{Base: cmp.Or(w.cfg.backoffBase, time.Second), Max: w.cfg.MaxBackoff, Jitter: true}
	if !w.seek(ctx) {
		w.send(ctx, w.plain("not held: "+errText(w.apiErr)))
	}
}

// seek tries to have the hold once, and reports whether the scale-in's
// outcome is settled: a notice was sent that says so (held, or nothing
// holds the instance). Otherwise it is tried again later.
func (w *watcher) seek(ctx context.Context) bool {
	ok, err := w.seekOnce(ctx)
	w.apiErr = err
	if !ok {
		w.meetAt = time.Now().Add(w.retry.Next())
	}
	return ok
}

func (w *watcher) seekOnce(ctx context.Context) (bool, error) {
	cl, err := w.s.clients(ctx, w.cfg)
	if err != nil {
		return false, err
	}
	id, group, err := w.s.where(ctx, w.cfg, cl)
	if err != nil {
		return false, err
	}
	if group == "" {
		w.phase = over
		w.send(ctx, w.plain("no termination lifecycle hook holds the instance: the API knows it in no group"))
		return true, nil
	}
	hooks, odd, err := cl.hooks(ctx, w.cfg.RequestTimeout, group)
	if err != nil {
		return false, err
	}
	if len(odd) > 0 {
		w.cfg.Logger.Warn("asg: termination hooks left out: their HeartbeatTimeout is not one Auto Scaling allows", "group", group, "hooks", odd)
	}
	if w.released() {
		// A Watch after Release (the Notifier was restarted): the hold is
		// handed back, and the scale-in is said all the same.
		w.phase = over
		if w.sent.Kind == 0 {
			w.send(ctx, w.plain("released"))
		}
		return true, nil
	}
	var beats []beat
	var lastErr error
	ok := 0
	for _, h := range hooks {
		t0 := time.Now()
		err := cl.heartbeat(ctx, w.cfg.RequestTimeout, group, id, h)
		switch {
		case err == nil:
			ok++
			b := w.newBeat(h)
			b.end, b.next = t0.Add(h.heartbeat), t0.Add(h.heartbeat/3)
			beats = append(beats, b)
		case noAction(err):
			// This hook holds nothing: its wait is over, or the
			// instance never waited on it.
		default:
			// It may hold the instance: its action times out a
			// HeartbeatTimeout after the wait began (set below).
			lastErr = err
			b := w.newBeat(h)
			b.next = time.Now().Add(b.off.Next())
			beats = append(beats, b)
		}
	}
	if lastErr != nil && ok == 0 {
		return false, lastErr
	}
	if len(beats) == 0 {
		w.phase = over
		w.send(ctx, w.plain("no termination lifecycle hook holds the instance"))
		return true, nil
	}
	start := cl.started(ctx, w.cfg.RequestTimeout, group, id)
	if start.IsZero() || start.After(w.seen.Observed) {
		// IMDS showed the state at most one poll after it turned.
		start = w.seen.Observed.Add(-cmp.Or(w.cfg.IMDS.AdvisoryInterval, imds.DefaultAdvisoryInterval))
	}
	w.start = start
	for i := range beats {
		if beats[i].end.IsZero() {
			beats[i].end = start.Add(beats[i].hook.heartbeat)
		}
	}
	w.limit = start.Add(beats[0].hook.global)
	for _, b := range beats[1:] {
		w.limit = minTime(w.limit, start.Add(b.hook.global))
	}
	if w.cfg.MaxHold > 0 {
		w.limit = minTime(w.limit, start.Add(w.cfg.MaxHold))
	}
	if w.released() {
		w.phase = over
		if w.sent.Kind == 0 {
			w.send(ctx, w.plain("released"))
		}
		return true, nil
	}
	w.beats = beats
	w.failed = lastErr
	w.schedule()
	w.s.mu.Lock()
	w.s.holding = &hold{group: group, id: id, hooks: holdHooks(beats)}
	w.s.mu.Unlock()
	w.phase = holding
	w.cfg.Logger.Info("asg: the scale-in is held", "group", group, "hooks", hookNames(beats), "deadline", w.deadline(), "hold_limit", w.limit)
	w.sendHeld(ctx)
	return true, nil
}

// beat records the heartbeats that are due.
func (w *watcher) beat(ctx context.Context) {
	if w.released() {
		w.phase = over
		return
	}
	w.s.mu.Lock()
	cl, id, group := w.s.cl, w.s.id, w.s.group
	w.s.mu.Unlock()
	now := time.Now()
	if _, ok := w.due(); ok && w.atLimit() {
		if !now.Before(w.deadline()) {
			w.phase = over
			w.cfg.Logger.Info("asg: the hold reached its limit; the instance goes on", "hold_limit", w.limit)
		}
		return
	}
	var failed error
	lapsed := false
	kept := w.beats[:0]
	for _, b := range w.beats {
		if b.next.IsZero() || now.Before(b.next) {
			kept = append(kept, b)
			continue
		}
		t0 := time.Now()
		err := cl.heartbeat(ctx, w.cfg.RequestTimeout, group, id, b.hook)
		switch {
		case err == nil:
			b.end = t0.Add(b.hook.heartbeat)
			b.next = t0.Add(b.hook.heartbeat / 3)
			b.off.Reset()
		case noAction(err):
			if w.released() {
				w.phase = over
				return
			}
			lapsed = true
			continue
		case ctx.Err() != nil:
			return
		default:
			failed = err
			b.next = time.Now().Add(b.off.Next())
			if !b.next.Before(b.end) {
				// No time left to try again: the action times out.
				b.next = b.end
			}
		}
		kept = append(kept, b)
	}
	w.beats = kept
	w.failed = failed
	now = time.Now()
	live := w.beats[:0]
	for _, b := range w.beats {
		if now.Before(b.end) {
			live = append(live, b)
		} else {
			lapsed = true
		}
	}
	w.beats = live
	if w.released() {
		w.phase = over
		return
	}
	if len(w.beats) == 0 || lapsed {
		w.lapse(ctx, failed)
		return
	}
	w.schedule()
	w.sendHeld(ctx)
}

// lapse says that the hold ended before Release.
func (w *watcher) lapse(ctx context.Context, err error) {
	w.phase = over
	w.failed = nil
	w.cfg.Logger.Warn("asg: the hold lapsed before Release; the instance goes on", "err", err)
	nt := w.plain("the hold lapsed")
	nt.Deadline = time.Now()
	w.send(ctx, nt)
}

// schedule keeps each hook's next heartbeat from taking the hold past its
// limit: a heartbeat that would is moved to as late as the limit allows,
// or dropped if none can move the hold any further.
func (w *watcher) schedule() {
	for i := range w.beats {
		b := &w.beats[i]
		hb := b.hook.heartbeat
		if latest := w.limit.Add(-hb); b.next.After(latest) {
			b.next = latest
			if !latest.After(b.end.Add(-hb)) {
				b.next = time.Time{}
			}
		}
	}
}

// atLimit reports whether no heartbeat is due: the hold cannot be moved
// past its limit.
func (w *watcher) atLimit() bool {
	for _, b := range w.beats {
		if !b.next.IsZero() {
			return false
		}
	}
	return true
}

// deadline is when the first hook's action times out.
func (w *watcher) deadline() time.Time {
	d := w.beats[0].end
	for _, b := range w.beats[1:] {
		d = minTime(d, b.end)
	}
	return minTime(d, w.limit)
}

// sendHeld sends the held notice if its Deadline moved.
func (w *watcher) sendHeld(ctx context.Context) {
	nt := w.seen
	nt.Held = true
	nt.Deadline = w.deadline()
	nt.HoldLimit = w.limit
	nt.Reason = "auto scaling: scale-in, held by lifecycle hook " + strings.Join(hookNames(w.beats), ", ")
	nt.Observed = time.Time{}
	if w.sent.Held && nt.Deadline.Equal(w.sent.Deadline) && nt.HoldLimit.Equal(w.sent.HoldLimit) {
		return
	}
	w.send(ctx, nt)
}

// plain is the scale-in notice, not held, with why.
func (w *watcher) plain(why string) termsig.Notice {
	nt := w.seen
	nt.Reason = "auto scaling: scale-in; " + why
	nt.Observed = time.Time{}
	return nt
}

func (w *watcher) send(ctx context.Context, nt termsig.Notice) {
	if w.sent.Kind == 0 {
		nt.Observed = w.seen.Observed // the first notice was seen when imds saw it
	}
	if w.r.Send(ctx, nt) == nil {
		w.sent = nt
	}
}

// released reports whether Release was called for the hold.
func (w *watcher) released() bool {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.released
}

func holdHooks(bs []beat) []hook {
	hs := make([]hook, len(bs))
	for i, b := range bs {
		hs[i] = b.hook
	}
	return hs
}

func hookNames(bs []beat) []string {
	ns := make([]string, len(bs))
	for i, b := range bs {
		ns[i] = b.hook.name
	}
	return ns
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// errText is err's text, or "unknown".
func errText(err error) string {
	if err == nil {
		return "unknown"
	}
	var ce *callError
	if errors.As(err, &ce) {
		return strings.TrimPrefix(ce.Error(), "asg: ")
	}
	return strings.TrimPrefix(err.Error(), "asg: ")
}

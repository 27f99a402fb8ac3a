package asg

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/internal/backoff"
)

// retryOff returns the backoff of the calls on h inside its hold: from a
// tenth of its heartbeat timeout (at most 1 s) up to a sixth of it, so
// that a heartbeat is tried again several times before the hold ends.
func (c Config) retryOff(h hook) *backoff.Backoff {
	hb := cmp.Or(h.heartbeat, 30*time.Second) // Auto Scaling's least
	base := min(hb/10, time.Second)
	if c.backoffBase > 0 {
		base = c.backoffBase
	}
	return &backoff.Backoff{Base: base, Max: hb / 6, Jitter: true}
}

// A watcher is one Watch of a Source. Its loop never waits for the
// consumer: notices go through a mailbox (see mailbox), so that a consumer
// that does not read C for a while costs it no heartbeat.
type watcher struct {
	s     *Source
	cfg   Config
	r     *termsig.Run
	inner *termsig.Notifier // package imds's source, on the lifecycle state only
	box   *mailbox

	apiErr error // the last failure of the API or of the clients, nil once one works
	failed error // the last heartbeat's failure, while heartbeats fail

	// The scale-in, once seen.
	seen   termsig.Notice // imds's notice of it
	phase  phase
	start  time.Time // when the instance began to wait
	limit  time.Time // no heartbeat takes the hold past it
	queued termsig.Notice
	beats  []beat // one per hook that holds the instance and whose end is known
	retry  backoff.Backoff

	// The first look at the group, before any scale-in.
	met     bool
	meetOff backoff.Backoff
	nextAt  time.Time // when the first look, or the hold, is tried again
}

func newWatcher(s *Source, cfg Config, r *termsig.Run, inner *termsig.Notifier) *watcher {
	return &watcher{s: s, cfg: cfg, r: r, inner: inner, box: newMailbox(),
		meetOff: backoff.Backoff{Base: cmp.Or(cfg.backoffBase, time.Second), Max: cfg.MaxBackoff, Jitter: true}}
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
	next time.Time // when the next heartbeat is due; zero: none can move the hold further
	off  *backoff.Backoff
}

func (w *watcher) run(ctx context.Context) {
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.box.deliver(sctx, w.r) })
	defer wg.Wait()
	defer stop()
	select {
	case <-w.inner.Ready():
	case <-ctx.Done():
		return
	}
	w.drain(ctx)
	// What the first look called for is on C before Ready.
	w.box.flush(ctx)
	w.r.Ready()
	w.nextAt = time.Now()
	status := time.NewTicker(cmp.Or(w.cfg.IMDS.Interval, imds.DefaultInterval))
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
		return w.nextAt, !w.met
	case seeking:
		return w.nextAt, true
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
// role that may not describe it shows at once in Status, and so that the
// hooks are known should the API fail at the scale-in: only when IMDS
// says the instance is in a group, so that an instance in none asks the
// API nothing.
func (w *watcher) meet(ctx context.Context) {
	err := w.meetOnce(ctx)
	w.apiErr = err
	if err != nil {
		w.nextAt = time.Now().Add(w.meetOff.Next())
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
	_, err = w.s.readHooks(ctx, w.cfg, cl, group)
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
	hooks := w.s.hooks
	w.s.mu.Unlock()
	w.phase = seeking
	// Tried again well within the shortest hold known, or Auto
	// Scaling's least (30 s) when none is.
	most := 30 * time.Second
	for _, h := range hooks {
		if h.known() {
			most = min(most, h.heartbeat)
		}
	}
	w.retry = backoff.Backoff{Base: cmp.Or(w.cfg.backoffBase, min(time.Second, most/10)), Max: min(w.cfg.MaxBackoff, most/6), Jitter: true}
	if !w.seek(ctx) {
		w.queue(w.plain("not held: " + errText(w.apiErr)))
	}
}

// seek tries to have the hold once, within RequestTimeout in all, and
// reports whether the scale-in's outcome is settled: a notice is queued
// that says so (held, or nothing holds the instance). Otherwise it is
// tried again later.
func (w *watcher) seek(ctx context.Context) bool {
	bctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	ok, err := w.seekOnce(bctx)
	w.apiErr = err
	if !ok {
		w.nextAt = time.Now().Add(w.retry.Next())
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
		w.queue(w.plain("no termination lifecycle hook holds the instance: the API knows it in no group"))
		return true, nil
	}
	hooks, herr := w.s.readHooks(ctx, w.cfg, cl, group)
	if herr != nil && len(hooks) == 0 {
		return false, herr
	}
	// With the hooks of the first look, the heartbeats go on.
	var known, odd []hook
	for _, h := range hooks {
		if h.known() {
			known = append(known, h)
		} else {
			odd = append(odd, h)
		}
	}
	if len(odd) > 0 {
		w.cfg.Logger.Warn("asg: termination hooks whose HeartbeatTimeout is not one Auto Scaling allows: they are completed on Release, but when they let the instance go is unknown",
			"group", group, "hooks", hookNames(odd))
	}
	if w.released() {
		// A Watch after Release (the Notifier was restarted): the hold is
		// handed back, and the scale-in is said all the same.
		w.phase = over
		if w.queued.Kind == 0 {
			w.queue(w.plain("released"))
		}
		return true, nil
	}
	// The wait began at most a poll before IMDS showed it; the limit
	// errs early, so that no heartbeat can pass MaxHold.
	estimate := w.seen.Observed.Add(-cmp.Or(w.cfg.IMDS.AdvisoryInterval, imds.DefaultAdvisoryInterval))
	limit := w.limitFrom(estimate, known)
	var beats []beat
	var due []int
	for _, h := range known {
		b := w.newBeat(h)
		if time.Now().Add(h.heartbeat).After(limit) {
			// A heartbeat now would pass the limit: the hold ends at the
			// hook's own timeout.
			b.end = estimate.Add(h.heartbeat)
		} else {
			due = append(due, len(beats))
		}
		beats = append(beats, b)
	}
	results := w.heartbeats(ctx, cl, group, id, beats, due)
	var kept []beat
	var guessed []bool // kept[i]'s end counts from the wait's start (set below)
	var lastErr error
	answered := len(beats) - len(due)
	for i, b := range beats {
		switch r, beaten := results[i]; {
		case !beaten:
			kept, guessed = append(kept, b), append(guessed, true)
		case r.err == nil:
			answered++
			b.end, b.next = r.at.Add(b.hook.heartbeat), r.at.Add(b.hook.heartbeat/3)
			kept, guessed = append(kept, b), append(guessed, false)
		case noAction(r.err):
			// This hook holds nothing: its wait is over, or the instance
			// never waited on it.
		default:
			// It may hold the instance: its action times out a
			// HeartbeatTimeout after the wait began.
			lastErr = r.err
			b.next = time.Now().Add(b.off.Next())
			kept, guessed = append(kept, b), append(guessed, true)
		}
	}
	beats = kept
	if lastErr != nil && answered == 0 {
		return false, lastErr
	}
	if len(beats) == 0 {
		w.phase = over
		why := "no termination lifecycle hook holds the instance"
		if len(odd) > 0 {
			why = "held by lifecycle hook " + strings.Join(hookNames(odd), ", ") + ", whose HeartbeatTimeout is not one Auto Scaling allows: its end is unknown"
			w.setHold(group, id, odd)
		}
		w.queue(w.plain(why))
		return true, herr
	}
	if start := cl.started(ctx, w.cfg.RequestTimeout, group, id); !start.IsZero() && !start.After(w.seen.Observed) {
		estimate = start
	}
	w.start = estimate
	w.limit = w.limitFrom(estimate, known)
	for i := range beats {
		if guessed[i] {
			beats[i].end = estimate.Add(beats[i].hook.heartbeat)
		}
	}
	if w.released() {
		w.phase = over
		return true, nil
	}
	w.beats = beats
	w.failed = lastErr
	w.schedule()
	w.setHold(group, id, append(hookList(beats), odd...))
	w.phase = holding
	w.cfg.Logger.Info("asg: the scale-in is held", "group", group, "hooks", hookNames(hookList(beats)), "deadline", w.deadline(), "hold_limit", w.holdLimit())
	w.queueHeld()
	return true, herr
}

// limitFrom is the furthest heartbeats may take the hold, for a wait that
// began at start: the shortest global limit of the hooks, or MaxHold.
func (w *watcher) limitFrom(start time.Time, hooks []hook) time.Time {
	limit := start.Add(maxGlobalTimeout)
	for _, h := range hooks {
		limit = minTime(limit, start.Add(h.global))
	}
	if w.cfg.MaxHold > 0 {
		limit = minTime(limit, start.Add(w.cfg.MaxHold))
	}
	return limit
}

func (w *watcher) newBeat(h hook) beat { return beat{hook: h, off: w.cfg.retryOff(h)} }

// setHold records what holds the instance, for Release.
func (w *watcher) setHold(group, id string, hooks []hook) {
	w.s.mu.Lock()
	w.s.holding = &hold{group: group, id: id, hooks: hooks}
	w.s.mu.Unlock()
}

// A result is how one heartbeat went.
type result struct {
	at  time.Time // when it was sent
	err error
}

// heartbeats records a heartbeat on the hooks of beats[i] for each i in
// due, at once, and returns how each went, by index.
func (w *watcher) heartbeats(ctx context.Context, cl *clients, group, id string, beats []beat, due []int) map[int]result {
	results := make([]result, len(due))
	var wg sync.WaitGroup
	for j, i := range due {
		wg.Go(func() {
			at := time.Now()
			results[j] = result{at, cl.heartbeat(ctx, w.cfg.RequestTimeout, group, id, beats[i].hook)}
		})
	}
	wg.Wait()
	out := make(map[int]result, len(due))
	for j, i := range due {
		out[i] = results[j]
	}
	return out
}

// beat records the heartbeats that are due.
func (w *watcher) beat(ctx context.Context) {
	if w.released() {
		w.phase = over
		return
	}
	now := time.Now()
	if w.atLimit() {
		if !now.Before(w.deadline()) {
			w.phase = over
			w.cfg.Logger.Info("asg: the hold reached its limit; the instance goes on", "hold_limit", w.holdLimit())
		}
		return
	}
	w.s.mu.Lock()
	cl, id, group := w.s.cl, w.s.id, w.s.group
	w.s.mu.Unlock()
	var due []int
	for i := range w.beats {
		b := &w.beats[i]
		switch {
		case b.next.IsZero() || now.Before(b.next):
		case now.Add(b.hook.heartbeat).After(w.limit):
			b.next = time.Time{} // too late: it would take the hold past its limit
		default:
			due = append(due, i)
		}
	}
	results := w.heartbeats(ctx, cl, group, id, w.beats, due)
	if ctx.Err() != nil || w.released() {
		w.phase = over
		return
	}
	var failed error
	kept := w.beats[:0]
	for i, b := range w.beats {
		r, beaten := results[i]
		switch {
		case !beaten:
		case r.err == nil:
			b.end, b.next = r.at.Add(b.hook.heartbeat), r.at.Add(b.hook.heartbeat/3)
			b.off.Reset()
		case noAction(r.err):
			// Its action is over (another party completed it, or it
			// timed out): the others may still hold the instance.
			continue
		default:
			failed = r.err
			if b.next = time.Now().Add(b.off.Next()); !b.next.Before(b.end) {
				b.next = b.end // no time left to try again: the action times out
			}
		}
		if time.Now().Before(b.end) {
			kept = append(kept, b)
		}
	}
	w.beats = kept
	w.failed = failed
	if len(w.beats) == 0 {
		w.lapse(failed)
		return
	}
	w.schedule()
	w.queueHeld()
}

// lapse says that the hold ended before Release. The failure that let it
// lapse, if any, stays in Status.
func (w *watcher) lapse(err error) {
	w.phase = over
	w.cfg.Logger.Warn("asg: the hold lapsed before Release; the instance goes on", "err", err)
	nt := w.plain("the hold lapsed")
	nt.Deadline = time.Now()
	w.queue(nt)
}

// schedule keeps each hook's next heartbeat from taking the hold past its
// limit: a heartbeat that would is moved to as late as the limit allows,
// or dropped if none can move the hold any further.
func (w *watcher) schedule() {
	for i := range w.beats {
		b := &w.beats[i]
		hb := b.hook.heartbeat
		// A little before the last moment, so that the heartbeat is sent
		// in time (see beat).
		if latest := w.limit.Add(-hb - min(hb/20, 500*time.Millisecond)); b.next.After(latest) {
			b.next = latest
			if !latest.After(b.end.Add(-hb)) {
				b.next = time.Time{}
			}
		}
	}
}

// atLimit reports whether no heartbeat is due: none can move the hold
// further.
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
	return d
}

// holdLimit is the latest the hold can last: its limit, or its Deadline
// once no heartbeat can move it further (the limit reached, or a MaxHold
// shorter than a hook's own timeout).
func (w *watcher) holdLimit() time.Time {
	if d := w.deadline(); w.atLimit() || d.After(w.limit) {
		return d
	}
	return w.limit
}

// queueHeld queues the held notice if its Deadline or HoldLimit moved.
func (w *watcher) queueHeld() {
	nt := w.seen
	nt.Held = true
	nt.Deadline = w.deadline()
	nt.HoldLimit = w.holdLimit()
	nt.Reason = "auto scaling: scale-in, held by lifecycle hook " + strings.Join(hookNames(hookList(w.beats)), ", ")
	nt.Observed = time.Time{}
	if w.queued.Held && nt.Deadline.Equal(w.queued.Deadline) && nt.HoldLimit.Equal(w.queued.HoldLimit) {
		return
	}
	w.queue(nt)
}

// plain is the scale-in notice, not held, with why.
func (w *watcher) plain(why string) termsig.Notice {
	nt := w.seen
	nt.Reason = "auto scaling: scale-in; " + why
	nt.Observed = time.Time{}
	return nt
}

// queue hands nt to the mailbox. The first notice of the scale-in was
// seen when imds saw it.
func (w *watcher) queue(nt termsig.Notice) {
	if w.queued.Kind == 0 {
		nt.Observed = w.seen.Observed
	}
	w.queued = nt
	w.box.put(nt)
}

// released reports whether Release was called for the scale-in.
func (w *watcher) released() bool {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.released
}

// A mailbox holds the notice the watcher wants the consumer to have next,
// and a goroutine of its own sends it: a later notice replaces one not
// sent yet (each says where the scale-in stands, and the first one's
// Observed is kept), so that nothing waits for the consumer.
type mailbox struct {
	mu      sync.Mutex
	pending *termsig.Notice
	busy    bool          // a Send is under way
	wake    chan struct{} // a notice was put
	changed chan struct{} // a Send ended
}

func newMailbox() *mailbox {
	return &mailbox{wake: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
}

func (m *mailbox) put(nt termsig.Notice) {
	m.mu.Lock()
	if m.pending != nil && nt.Observed.IsZero() {
		nt.Observed = m.pending.Observed
	}
	m.pending = &nt
	m.mu.Unlock()
	signal(m.wake)
}

// deliver sends what is put, until ctx is done.
func (m *mailbox) deliver(ctx context.Context, r *termsig.Run) {
	for {
		select {
		case <-m.wake:
		case <-ctx.Done():
			return
		}
		for {
			m.mu.Lock()
			nt := m.pending
			m.pending = nil
			m.busy = nt != nil
			m.mu.Unlock()
			if nt == nil {
				signal(m.changed)
				break
			}
			_ = r.Send(ctx, *nt)
			signal(m.changed)
		}
	}
}

// flush waits until what was put has been sent, or ctx is done.
func (m *mailbox) flush(ctx context.Context) {
	for {
		m.mu.Lock()
		empty := m.pending == nil && !m.busy
		m.mu.Unlock()
		if empty {
			return
		}
		select {
		case <-m.changed:
		case <-ctx.Done():
			return
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func hookList(bs []beat) []hook {
	hs := make([]hook, len(bs))
	for i, b := range bs {
		hs[i] = b.hook
	}
	return hs
}

func hookNames(hs []hook) []string {
	ns := make([]string, len(hs))
	for i, h := range hs {
		ns[i] = h.name
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

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
)

// An action is what kubedrain does for a kind of notice.
type action int

const (
	ignore action = iota
	cordon        // cordon and taint the node
	drain         // cordon, taint and evict the pods
)

func parseAction(s string) (action, error) {
	switch s {
	case "ignore":
		return ignore, nil
	case "cordon":
		return cordon, nil
	case "drain":
		return drain, nil
	}
	return 0, fmt.Errorf("%q is not ignore, cordon or drain", s)
}

func (a action) String() string { return [...]string{"ignore", "cordon", "drain"}[a] }

// A controller turns notices into changes to the node. Notices are
// handled one at a time, in order, by run's goroutine, and none waits for
// the API server longer than writeTimeout: a node write that fails for a
// while is tried again from run's loop (see flush), so a Terminate behind
// a Rebalance is never held up by it. The evictions of a drain run beside
// it, so that a later notice (a Terminate after a Rebalance, a Cleared) is
// handled while they wait for a budget.
//
// The drain follows this run's own view of the reasons (view), not the
// node's record: a drain starts without waiting for the cordon, goes on
// when the node cannot be written, and is driven only by notices this run
// has seen, never by a reason an earlier run left in the record.
type controller struct {
	kube    *kube
	evictor *evictor
	// onRebalance and onMaintenance are what advice does; imminent
	// notices always drain.
	onRebalance, onMaintenance action
	// fallback is how long a drain lasts for a notice without a deadline.
	fallback time.Duration
	// maxHold bounds how long a held termination is used, from its first
	// notice: the hold's end that the drain goes by is at most this far
	// after it (see holdEnd).
	maxHold time.Duration
	// minDrain is the shortest drain: a notice whose deadline is less
	// than margin away still gets every pod evicted once (with 1 s of
	// grace) and refusals retried this long.
	minDrain time.Duration
	// writeTimeout bounds one attempt to write the node, conflicts
	// included; retry is the first wait before a failed write is tried
	// again, doubling up to the evictor's maxBackoff.
	writeTimeout, retry time.Duration
	// cordonWait is how long a drain waits for the cordon that goes
	// with it before it evicts anyway.
	cordonWait time.Duration
	log        *slog.Logger
	now        func() time.Time

	// healthy says whether a source has heard from its origin and has no
	// error now (see reconcile); nil means always.
	healthy func(source string) bool
	// release lets the platform go ahead once the drain for a held
	// termination is over (Notifier.Release); nil releases nothing.
	release func(context.Context, termsig.Notice) error
	// srv counts the notices, serves the probes and posts to the
	// webhook; nil does nothing.
	srv *ops.Server
	// drainFor is the latest notice to drain for: the drain's duration
	// counts from its Observed, and its outcome is posted about it.
	drainFor termsig.Notice

	view    record               // the reasons of this run's notices
	ends    map[string]time.Time // when each drain reason's drain ends
	holds   map[string]*hold     // this run's held terminations, by reason key
	warned  map[string]bool      // reasons reconcile has logged it keeps
	drain   *running             // the drain under way, or the last one
	pending []pending            // node changes not written yet, in order
	wait    time.Duration        // the backoff of pending
	retryC  <-chan time.Time     // fires when pending is to be tried again
	timer   *time.Timer
	// failures counts the failed attempts of pending; lastErr is the
	// text of the last one logged.
	failures int
	lastErr  string
	// releasing counts the releases under way; run waits for them.
	releasing sync.WaitGroup
}

// A hold is a held termination (termsig.Notice.Held, such as an Auto
// Scaling termination hook's): the platform keeps the machine until it is
// released, and its source extends the hold meanwhile, each time with a
// later notice.
type hold struct {
	first    time.Time      // when its first notice was seen: maxHold counts from it
	last     termsig.Notice // its latest notice, the one released
	released bool           // released, or being released
}

// A change edits kubedrain's record of the node (see kube.update).
type change func(*record, *corev1.Node)

// A pending change is one not written yet, with what it is about: the
// reason's key, and whether it is an imminent notice's.
type pending struct {
	key      string
	imminent bool
	apply    change
}

// running is one drain: the evictions for the drain reasons of the view.
// Its end and deadline move later, without a new drain, when the holds it
// drains for are extended (see extend).
type running struct {
	end      time.Time   // when it ends; run's goroutine only
	timer    *time.Timer // cancels it at end
	released bool        // its holds were released; run's goroutine only
	cancel   context.CancelCauseFunc
	done     chan struct{}

	mu       sync.Mutex
	deadline time.Time // caps the grace periods
	// holds are the keys of the held terminations it drains for: once
	// it is over and their pods are gone, they are released.
	holds []string
	// ending is set when its evictions are over: holds can no longer be
	// added, since it may no longer wait for their pods.
	ending bool
}

// errDrainEnd ends a drain's context at its end.
var errDrainEnd = fmt.Errorf("the drain's end has come: %w", context.DeadlineExceeded)

// deadlineNow returns what caps the grace periods now.
func (d *running) deadlineNow() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deadline
}

// holdFor adds keys to the holds d drains for, and reports whether it
// could: not once d's evictions are over.
func (d *running) holdFor(keys []string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ending {
		for _, k := range keys {
			if !slices.Contains(d.holds, k) {
				return false
			}
		}
		return true
	}
	for _, k := range keys {
		if !slices.Contains(d.holds, k) {
			d.holds = append(d.holds, k)
		}
	}
	return true
}

// heldKeys returns the keys of the holds d drains for.
func (d *running) heldKeys() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.holds)
}

// evicted marks d's evictions as over, and reports whether it drains for
// holds: it then waits for its pods to be gone.
func (d *running) evicted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ending = true
	return len(d.holds) > 0
}

// extend moves the drain's end and deadline to later ones; earlier ones
// leave them as they are. An end that has come already stays: the drain
// is over.
func (d *running) extend(end, deadline time.Time) {
	if end.After(d.end) && d.timer.Stop() {
		d.end = end
		d.timer.Reset(time.Until(end))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if deadline.After(d.deadline) {
		d.deadline = deadline
	}
}

func (d *running) finished() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func key(source, event string) string { return source + "\x00" + event }

// actionFor says what kubedrain does for a notice of kind k.
func (c *controller) actionFor(k termsig.Kind) action {
	switch {
	case k.Imminent():
		return drain
	case k == termsig.Rebalance:
		return c.onRebalance
	case k == termsig.Maintenance:
		return c.onMaintenance
	}
	return ignore
}

// handle acts on one notice.
func (c *controller) handle(ctx context.Context, nt termsig.Notice) {
	c.srv.Noticed(nt)
	if nt.Kind == termsig.Cleared {
		c.clear(ctx, nt)
		return
	}
	act := c.actionFor(nt.Kind)
	if act == ignore {
		c.log.Info("kubedrain: ignoring the notice", "notice", nt)
		return
	}
	deadline := nt.Deadline
	if nt.Kind.Imminent() {
		if nt.Held && c.extend(nt) {
			return
		}
		deadline = c.noteHold(nt)
	}
	r := reasonOf(nt, act == drain)
	r.Deadline = deadline
	k := key(r.Source, r.Event)
	fresh := c.view.add(r)
	if _, ok := c.ends[k]; fresh || !ok {
		c.ends[k] = c.end(deadline, nt.Observed)
	}
	if nt.Held {
		c.log.Info("kubedrain: "+act.String()+" within the hold", "notice", nt, "hold_end", deadline)
	} else {
		c.log.Info("kubedrain: "+act.String(), "notice", nt)
	}
	// The drain starts now, and waits for the cordon below at most
	// cordonWait: pods evicted before it could be scheduled right back.
	cordoned := make(chan struct{})
	if r.Drain {
		c.drainFor = nt
	}
	c.follow(ctx, fresh && r.Drain, cordoned)
	up, err := c.write(ctx, pending{key: k, imminent: r.Kind.Imminent(), apply: func(rec *record, node *corev1.Node) {
		if rec.add(r) && r.Kind.Imminent() {
			rec.BootID = node.Status.NodeInfo.BootID
		}
	}})
	close(cordoned)
	// The cordon is kubedrain's first action on a notice (the drain
	// waits for it).
	c.srv.Acted(nt)
	if err != nil {
		return // pending: logged by flush, reported when it is written
	}
	if up.wrote {
		c.kube.event(ctx, corev1.EventTypeWarning, "TerminationNotice", actionName(act), nt.String())
	}
	c.report(ctx, up, nt.String())
}

// noteHold keeps track of the held terminations, and returns the
// deadline the drain for nt goes by: for a held notice, the hold's end
// (see holdEnd), and a held notice for an event not held yet starts a
// hold; else nt's Deadline, and a notice for a held event that is not
// held says that the hold is over.
func (c *controller) noteHold(nt termsig.Notice) time.Time {
	k := key(nt.Source, nt.Event)
	h, ok := c.holds[k]
	switch {
	case nt.Held:
		if !ok || h.released {
			h = &hold{first: nt.Observed}
			if h.first.IsZero() {
				h.first = c.now()
			}
			c.holds[k] = h
		}
		h.last = nt
		return c.holdEnd(h, nt)
	case ok:
		delete(c.holds, k)
		c.log.Warn("kubedrain: the hold is over: draining by its deadline", "notice", nt)
	}
	return nt.Deadline
}

// holdEnd is the end of hold h as nt says it stands: nt's Deadline, but
// not after its HoldLimit, nor maxHold after the hold's first notice.
func (c *controller) holdEnd(h *hold, nt termsig.Notice) time.Time {
	end := h.first.Add(c.maxHold)
	for _, t := range []time.Time{nt.Deadline, nt.HoldLimit} {
		if !t.IsZero() && t.Before(end) {
			end = t
		}
	}
	return end
}

// extend handles a held notice for a hold this run already drains for:
// the hold was extended. Its later end is news for the drain only: the
// drain under way is not started again, but its end, and the deadline of
// its later attempts' grace periods, move with the hold (the node's
// cordon and record stay as they are). It reports false when nt is news
// of another kind (a new hold, another kind, an earlier end), for handle
// to act on as on any notice.
func (c *controller) extend(nt termsig.Notice) bool {
	k := key(nt.Source, nt.Event)
	h, ok := c.holds[k]
	i := slices.IndexFunc(c.view.Reasons, func(r reason) bool { return r.same(nt.Source, nt.Event) })
	if !ok || i < 0 || !c.view.Reasons[i].Held || c.view.Reasons[i].Kind != nt.Kind {
		return false
	}
	if h.released {
		c.log.Debug("kubedrain: a notice for a hold already released", "notice", nt)
		return true
	}
	end := c.holdEnd(h, nt)
	r := &c.view.Reasons[i]
	if end.Before(r.Deadline) {
		return false
	}
	h.last = nt
	d := c.drain
	if !end.After(r.Deadline) || d == nil || d.finished() {
		// Nothing moved, or the drain is over: its holds are being
		// released.
		return true
	}
	r.Deadline = end
	c.ends[k] = c.end(end, nt.Observed)
	dend, deadline, _ := c.target()
	d.extend(dend, deadline)
	c.log.Info("kubedrain: the hold was extended; the drain goes on", "notice", nt, "hold_end", end, "drain_end", d.end)
	return true
}

// clear acts on a Cleared notice: the advice it names no longer holds.
func (c *controller) clear(ctx context.Context, nt termsig.Notice) {
	if c.view.clear(nt.Source, nt.Event) {
		delete(c.ends, key(nt.Source, nt.Event))
	}
	up, err := c.write(ctx, pending{key: key(nt.Source, nt.Event), apply: func(rec *record, _ *corev1.Node) {
		rec.clear(nt.Source, nt.Event)
	}})
	if err == nil {
		c.report(ctx, up, nt.String())
		if up.uncordoned {
			c.srv.Outcome(nt, "uncordoned", nil)
		}
	}
	c.follow(ctx, false, nil)
}

// report logs, and records as Events, what a node write changed.
func (c *controller) report(ctx context.Context, up update, why string) {
	if up.lifted {
		c.log.Warn("kubedrain: the node was uncordoned while kubedrain held it; its reasons no longer cordon it", "reasons", up.rec.String())
	}
	switch {
	case up.excluded:
		c.log.Info("kubedrain: excluded the node from external load balancers", "label", ExcludeLabel+"="+ExcludeValue, "why", why)
	case up.included:
		c.log.Info("kubedrain: removed its label: external load balancers may send to the node again", "label", ExcludeLabel, "why", why)
	case up.foreign != "":
		c.log.Info("kubedrain: the node has the label already, set by someone else: kubedrain leaves it as it is, and never removes it", "label", up.foreign)
	}
	switch {
	case up.uncordoned:
		c.log.Info("kubedrain: uncordoned the node", "why", why)
		c.kube.event(ctx, corev1.EventTypeNormal, "TerminationNoticeCleared", "Uncordon", why)
	case up.untainted:
		c.log.Info("kubedrain: removed the taint; the cordon is not kubedrain's, it stays as it is", "why", why)
		c.kube.event(ctx, corev1.EventTypeNormal, "TerminationNoticeCleared", "Untaint", why)
	case up.wrote && len(up.rec.Reasons) > 0:
		c.log.Info("kubedrain: node updated", "why", why, "reasons", up.rec.String())
	}
}

func actionName(a action) string {
	if a == drain {
		return "Drain"
	}
	return "Cordon"
}

// end returns when a drain for a notice ends: margin before its
// deadline, or fallback after it was observed when it has none; and not
// before minDrain from now.
func (c *controller) end(deadline, observed time.Time) time.Time {
	var end time.Time
	switch {
	case !deadline.IsZero():
		end = deadline.Add(-c.evictor.margin)
	case observed.IsZero():
		end = c.now().Add(c.fallback)
	default:
		end = observed.Add(c.fallback)
	}
	if least := c.now().Add(c.minDrain); end.Before(least) {
		return least
	}
	return end
}

// follow starts, moves or stops the drain so that it matches the view.
// A drain runs while the view has a reason to drain whose end is still
// ahead; it lasts until the latest such end, but no longer than margin
// before the earliest deadline of those reasons, since the machine is
// gone then; and that deadline caps grace periods (none known: the pods'
// own). It starts again when the deadline changes (a Terminate during a
// Maintenance drain: grace periods shrink to it) or it needs to last
// longer, and, once it has finished, when fresh says that a reason to
// drain is new or has news: pods that landed since, or that a budget
// kept, get another try. Cordon-only advice never starts one. A drain it
// starts waits for cordoned to be closed, or cordonWait, before it
// evicts; nil means no wait.
//
// A drain for a held termination (see noteHold) goes by the hold's end
// as its deadline; once it is over and the pods it evicted are gone, the
// hold is released (see drainOver), so that the machine goes then. An
// extension of the hold moves the end of the drain under way, without
// starting it again (see extend).
func (c *controller) follow(ctx context.Context, fresh bool, cordoned <-chan struct{}) {
	end, deadline, holds := c.target()
	d := c.drain
	switch {
	case end.IsZero():
		c.stopDrain()
	case d == nil, !deadline.Equal(d.deadlineNow()), end.After(d.end), fresh && d.finished():
		c.stopDrain()
		c.startDrain(ctx, end, deadline, holds, cordoned)
	case !d.holdFor(holds):
		// A hold came as the drain under way finished its evictions:
		// one drain more, to wait for its pods.
		c.stopDrain()
		c.startDrain(ctx, end, deadline, holds, cordoned)
	}
}

// target returns what the drain should be, by the view: its end, the
// deadline of its grace periods (zero: the pods' own), and the keys of
// the held terminations among its reasons. The end is zero when no
// reason to drain has its end ahead.
func (c *controller) target() (end, deadline time.Time, holds []string) {
	now := c.now()
	for _, r := range c.view.Reasons {
		k := key(r.Source, r.Event)
		e := c.ends[k]
		if !r.Drain || !e.After(now) {
			continue
		}
		end = later(end, e)
		if !r.Deadline.IsZero() && (deadline.IsZero() || r.Deadline.Before(deadline)) {
			deadline = r.Deadline
		}
		if h, ok := c.holds[k]; ok && r.Held && !h.released {
			holds = append(holds, k)
		}
	}
	if !deadline.IsZero() {
		end = earlier(end, later(deadline.Add(-c.evictor.margin), now.Add(c.minDrain)))
	}
	return end, deadline, holds
}

func later(a, b time.Time) time.Time {
	if a.IsZero() || b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func (c *controller) startDrain(ctx context.Context, end, deadline time.Time, holds []string, cordoned <-chan struct{}) {
	// The end is a timer rather than the context's deadline, so that an
	// extended hold can move it (a context's deadline never changes).
	dctx, cancel := context.WithCancelCause(ctx)
	d := &running{end: end, deadline: deadline, holds: holds, cancel: cancel, done: make(chan struct{})}
	d.timer = time.AfterFunc(time.Until(end), func() { cancel(errDrainEnd) })
	c.drain = d
	log := c.log.With("drain", c.view.String())
	nt := c.drainFor
	go func() {
		defer close(d.done)
		defer cancel(nil)
		defer d.timer.Stop()
		if cordoned != nil {
			t := time.NewTimer(c.cordonWait)
			select {
			case <-cordoned:
			case <-t.C:
				log.Warn("kubedrain: evicting before the cordon has landed", "waited", c.cordonWait)
			case <-dctx.Done():
			}
			t.Stop()
		}
		rep, err := c.evictor.drain(dctx, d.deadlineNow, log)
		held := d.evicted()
		if !errors.Is(err, context.Canceled) {
			c.drained(nt, rep, err)
		}
		switch {
		case errors.Is(err, context.Canceled):
			log.Info("kubedrain: drain stopped", "evicted", rep.Evicted, "gone", rep.Gone)
			return
		case err != nil:
			log.Error("kubedrain: drain failed", "err", err)
			c.kube.event(ctx, corev1.EventTypeWarning, "DrainFailed", "Drain", err.Error())
		default:
			note := fmt.Sprintf("evicted %d pods (%d already gone), left %d refused by a PodDisruptionBudget and %d failing, skipped %d",
				rep.Evicted, rep.Gone, rep.Refused, rep.Failed, rep.Skipped)
			if c.evictor.exempt != nil {
				note += fmt.Sprintf(" (%d exempt by --pod-selector-exempt)", rep.Exempt)
			}
			typ := corev1.EventTypeNormal
			if rep.Refused+rep.Failed > 0 {
				typ = corev1.EventTypeWarning
			}
			c.kube.event(ctx, typ, "Drained", "Drain", note)
			log.Info("kubedrain: drain done", "evicted", rep.Evicted, "gone", rep.Gone, "refused", rep.Refused, "failed", rep.Failed, "skipped", rep.Skipped, "exempt", rep.Exempt)
		}
		if !held || err != nil || c.kube.dryRun {
			return
		}
		// The machine is held for the pods: it may go once they are gone,
		// not before, or it would cut their grace periods short.
		switch err := c.evictor.awaitGone(dctx, rep.terminating, log); {
		case err == nil:
			log.Info("kubedrain: the evicted pods are gone", "pods", len(rep.terminating))
		case stopped(dctx):
			log.Info("kubedrain: drain stopped while its pods terminated")
		default:
			log.Warn("kubedrain: pods still terminating at the drain's end", "err", err)
		}
	}()
}

// drained counts the end of a drain's evictions for nt, which ended with
// rep and err (the pods could not be listed), and posts its outcome:
// "drained" when no pod that should go is left, else "pods left".
func (c *controller) drained(nt termsig.Notice, rep drainReport, err error) {
	left, pods := rep.Refused+rep.Failed, fmt.Sprint(rep.Refused+rep.Failed)
	if err != nil {
		left, pods = -1, "unknown"
	}
	seconds := -1.0 // not known: a notice not from a Notifier
	if !nt.Observed.IsZero() {
		seconds = max(c.now().Sub(nt.Observed).Seconds(), 0)
	}
	c.kube.m.drained(seconds, left)
	outcome, fields := "drained", map[string]string{"evicted": fmt.Sprint(rep.Evicted), "pods_left": pods}
	if left != 0 {
		outcome = "pods left"
	}
	if err != nil {
		fields["error"] = err.Error()
	}
	if c.kube.dryRun {
		fields["dry_run"] = "true"
	}
	c.srv.Outcome(nt, outcome, fields)
}

// stopDrain cancels the drain under way, if any, and waits for it. A
// drain that was over already has its holds released.
func (c *controller) stopDrain() {
	d := c.drain
	if d == nil {
		return
	}
	over := d.finished()
	d.cancel(nil)
	<-d.done
	if over {
		c.drainOver(d)
	}
	c.drain = nil
}

// drainOverC returns a channel that is closed once the drain under way is
// over and has holds to release; nil when there is none.
func (c *controller) drainOverC() <-chan struct{} {
	if d := c.drain; d != nil && !d.released && len(d.heldKeys()) > 0 {
		return d.done
	}
	return nil
}

// releaseTimeout bounds one release (Auto Scaling's
// CompleteLifecycleAction, retried by its source within it).
const releaseTimeout = 5 * time.Second

// drainOver releases the holds that d, now over, drained for: the
// platform may let the machine go now rather than at the hold's end. A
// release that fails leaves the hold to end by itself, at its deadline
// (the source stops extending it when kubedrain stops). In a dry run
// nothing is released.
func (c *controller) drainOver(d *running) {
	if d.released {
		return
	}
	d.released = true
	for _, k := range d.heldKeys() {
		h, ok := c.holds[k]
		if !ok || h.released {
			continue
		}
		h.released = true
		nt := h.last
		if c.kube.dryRun {
			c.log.Info("kubedrain: dry run: would release the hold", "notice", nt)
			continue
		}
		if c.release == nil {
			continue
		}
		c.releasing.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			defer cancel()
			if err := c.release(ctx, nt); err != nil {
				c.log.Warn("kubedrain: could not release the hold; it ends at its deadline", "notice", nt, "err", err)
				return
			}
			c.log.Info("kubedrain: released the hold: the machine may go", "notice", nt)
			c.kube.event(ctx, corev1.EventTypeNormal, "TerminationReleased", "Release", nt.String())
		})
	}
}

// write queues p after the changes not written yet and tries, once, to
// write them all (see flush). p replaces the pending changes about the
// same reason that it makes moot: advice (or its Cleared) replaces
// earlier advice, an imminent notice replaces all; only an imminent
// notice's change outlives later advice. So however long the API server
// is away, and however often advice comes and goes meanwhile, at most
// two changes per reason wait.
func (c *controller) write(ctx context.Context, p pending) (update, error) {
	c.pending = slices.DeleteFunc(c.pending, func(q pending) bool {
		return q.key == p.key && (!q.imminent || p.imminent)
	})
	c.pending = append(c.pending, p)
	return c.flush(ctx)
}

// flush tries once, for at most writeTimeout, to apply the pending
// changes to the node, in order. After an error that may pass (the API
// server unreachable or overloaded) they stay pending and retryC fires
// after a backoff; after one that will not (forbidden, the node gone)
// they are dropped, with an error logged.
func (c *controller) flush(ctx context.Context) (update, error) {
	ctx, cancel := context.WithTimeout(ctx, c.writeTimeout)
	defer cancel()
	ops := c.pending
	up, err := c.kube.update(ctx, func(rec *record, node *corev1.Node) {
		for _, p := range ops {
			p.apply(rec, node)
		}
	})
	if c.timer != nil {
		c.timer.Stop()
		c.retryC = nil
	}
	switch {
	case err == nil:
		if c.failures > 0 {
			c.log.Info("kubedrain: node update succeeded", "after-failures", c.failures)
		}
		c.pending, c.wait, c.failures, c.lastErr = nil, 0, 0, ""
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		// kubedrain is stopping: nothing to say.
	case transient(err):
		c.wait = min(max(2*c.wait, c.retry), c.evictor.maxBackoff)
		c.failures++
		// One line per failure that changes, not one per retry.
		if msg := err.Error(); msg != c.lastErr {
			c.lastErr = msg
			c.log.Warn("kubedrain: node update failed, trying again", "err", err, "in", c.wait)
		} else {
			c.log.Debug("kubedrain: node update failed, trying again", "err", err, "in", c.wait)
		}
		c.timer = time.NewTimer(jitter(c.wait))
		c.retryC = c.timer.C
	default:
		c.pending, c.wait, c.failures, c.lastErr = nil, 0, 0, ""
		c.log.Error("kubedrain: node update failed", "err", err)
	}
	return up, err
}

// transient reports whether err may pass by itself.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // the network, a timeout
	}
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsNotFound(err),
		apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err):
		return false
	}
	return true
}

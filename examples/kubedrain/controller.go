package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/termsig/termsig"
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

	view    record               // the reasons of this run's notices
	ends    map[string]time.Time // when each drain reason's drain ends
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
type running struct {
	end, deadline time.Time
	cancel        context.CancelFunc
	done          chan struct{}
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
	if nt.Kind == termsig.Cleared {
		c.clear(ctx, nt)
		return
	}
	act := c.actionFor(nt.Kind)
	if act == ignore {
		c.log.Info("kubedrain: ignoring the notice", "notice", nt)
		return
	}
	r := reasonOf(nt, act == drain)
	k := key(r.Source, r.Event)
	fresh := c.view.add(r)
	if _, ok := c.ends[k]; fresh || !ok {
		c.ends[k] = c.end(nt.Deadline, nt.Observed)
	}
	c.log.Info("kubedrain: "+act.String(), "notice", nt)
	// The drain starts now, and waits for the cordon below at most
	// cordonWait: pods evicted before it could be scheduled right back.
	cordoned := make(chan struct{})
	c.follow(ctx, fresh && r.Drain, cordoned)
	up, err := c.write(ctx, pending{key: k, imminent: r.Kind.Imminent(), apply: func(rec *record, node *corev1.Node) {
		if rec.add(r) && r.Kind.Imminent() {
			rec.BootID = node.Status.NodeInfo.BootID
		}
	}})
	close(cordoned)
	if err != nil {
		return // pending: logged by flush, reported when it is written
	}
	if up.wrote {
		c.kube.event(ctx, corev1.EventTypeWarning, "TerminationNotice", actionName(act), nt.String())
	}
	c.report(ctx, up, nt.String())
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
	}
	c.follow(ctx, false, nil)
}

// report logs, and records as Events, what a node write changed.
func (c *controller) report(ctx context.Context, up update, why string) {
	if up.lifted {
		c.log.Warn("kubedrain: the node was uncordoned while kubedrain held it; its reasons no longer cordon it", "reasons", up.rec.String())
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
func (c *controller) follow(ctx context.Context, fresh bool, cordoned <-chan struct{}) {
	now := c.now()
	var end, deadline time.Time
	for _, r := range c.view.Reasons {
		e := c.ends[key(r.Source, r.Event)]
		if !r.Drain || !e.After(now) {
			continue
		}
		end = later(end, e)
		if !r.Deadline.IsZero() && (deadline.IsZero() || r.Deadline.Before(deadline)) {
			deadline = r.Deadline
		}
	}
	if !deadline.IsZero() {
		end = earlier(end, later(deadline.Add(-c.evictor.margin), now.Add(c.minDrain)))
	}
	d := c.drain
	switch {
	case end.IsZero():
		c.stopDrain()
	case d == nil, !deadline.Equal(d.deadline), end.After(d.end), fresh && d.finished():
		c.stopDrain()
		c.startDrain(ctx, end, deadline, cordoned)
	}
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

func (c *controller) startDrain(ctx context.Context, end, deadline time.Time, cordoned <-chan struct{}) {
	dctx, cancel := context.WithDeadline(ctx, end)
	d := &running{end: end, deadline: deadline, cancel: cancel, done: make(chan struct{})}
	c.drain = d
	log := c.log.With("drain", c.view.String())
	go func() {
		defer close(d.done)
		defer cancel()
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
		rep, err := c.evictor.drain(dctx, deadline, log)
		switch {
		case errors.Is(err, context.Canceled):
			log.Info("kubedrain: drain stopped", "evicted", rep.Evicted, "gone", rep.Gone)
		case err != nil:
			log.Error("kubedrain: drain failed", "err", err)
			c.kube.event(ctx, corev1.EventTypeWarning, "DrainFailed", "Drain", err.Error())
		default:
			note := fmt.Sprintf("evicted %d pods (%d already gone), left %d refused by a PodDisruptionBudget and %d failing, skipped %d",
				rep.Evicted, rep.Gone, rep.Refused, rep.Failed, rep.Skipped)
			typ := corev1.EventTypeNormal
			if rep.Refused+rep.Failed > 0 {
				typ = corev1.EventTypeWarning
			}
			c.kube.event(ctx, typ, "Drained", "Drain", note)
			log.Info("kubedrain: drain done", "evicted", rep.Evicted, "gone", rep.Gone, "refused", rep.Refused, "failed", rep.Failed, "skipped", rep.Skipped)
		}
	}()
}

// stopDrain cancels the drain under way, if any, and waits for it.
func (c *controller) stopDrain() {
	if c.drain == nil {
		return
	}
	c.drain.cancel()
	<-c.drain.done
	c.drain = nil
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

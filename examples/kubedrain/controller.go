package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// handled one at a time, in order, by Run's goroutine; the evictions of
// a drain run beside it, so that a later notice (a Terminate after a
// Rebalance, a Cleared) is handled while they wait for a budget.
type controller struct {
	kube    *kube
	evictor *evictor
	// onRebalance and onMaintenance are what advice does; imminent
	// notices always drain.
	onRebalance, onMaintenance action
	// fallback is how long a drain lasts for a notice without a deadline.
	fallback time.Duration
	// retry is the first wait before a failed node update is tried again.
	retry time.Duration
	log   *slog.Logger
	now   func() time.Time

	// healthy says whether a source has heard from its origin and has no
	// error now (see reconcile); nil means always.
	healthy func(source string) bool

	seen   map[string]bool      // (source, event) of the notices of this run
	warned map[string]bool      // reasons reconcile has logged it keeps
	ends   map[string]time.Time // when each drain reason's drain ends
	drain  *running             // the drain under way, or the last one
	last   record               // the record as last written or read
}

// running is one drain: the evictions for the drain reasons of a record.
type running struct {
	end    time.Time
	cancel context.CancelFunc
	done   chan struct{}
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
	c.seen[key(nt.Source, nt.Event)] = true
	r := reasonOf(nt, act == drain)
	if _, ok := c.ends[key(r.Source, r.Event)]; !ok || !nt.Deadline.IsZero() {
		c.ends[key(r.Source, r.Event)] = c.end(nt.Deadline, nt.Observed)
	}
	c.log.Info("kubedrain: "+act.String(), "notice", nt)
	up, err := c.update(ctx, nt, func(rec *record, node *corev1.Node) {
		if rec.add(r) && r.Kind.Imminent() {
			rec.BootID = node.Status.NodeInfo.BootID
		}
	})
	if err != nil {
		// The drain goes on without the cordon: the node's record is
		// out of reach, so this run's own view of it stands in.
		c.log.Error("kubedrain: could not cordon the node", "notice", nt, "err", err)
		c.last.add(r)
		c.follow(ctx, c.last)
		return
	}
	if up.wrote {
		c.kube.event(ctx, corev1.EventTypeWarning, "TerminationNotice", actionName(act), nt.String())
	}
	c.follow(ctx, up.rec)
}

// clear acts on a Cleared notice: the advice it names no longer holds.
func (c *controller) clear(ctx context.Context, nt termsig.Notice) {
	delete(c.seen, key(nt.Source, nt.Event))
	delete(c.ends, key(nt.Source, nt.Event))
	up, err := c.update(ctx, nt, func(rec *record, _ *corev1.Node) { rec.clear(nt.Source, nt.Event) })
	if err != nil {
		c.log.Error("kubedrain: could not update the node", "notice", nt, "err", err)
		return
	}
	c.afterClear(ctx, up, nt.String())
}

// afterClear logs and records what a cleared reason changed.
func (c *controller) afterClear(ctx context.Context, up update, why string) {
	switch {
	case up.uncordoned:
		c.log.Info("kubedrain: uncordoned the node", "why", why)
		c.kube.event(ctx, corev1.EventTypeNormal, "TerminationNoticeCleared", "Uncordon", why)
	case up.wrote && len(up.rec.Reasons) == 0:
		c.log.Info("kubedrain: removed the taint; the cordon is not kubedrain's, it stays", "why", why)
		c.kube.event(ctx, corev1.EventTypeNormal, "TerminationNoticeCleared", "Untaint", why)
	case up.wrote:
		c.log.Info("kubedrain: the node stays cordoned", "why", why, "reasons", up.rec.String())
	}
	c.follow(ctx, up.rec)
}

func actionName(a action) string {
	if a == drain {
		return "Drain"
	}
	return "Cordon"
}

// end returns when a drain for a notice ends: margin before its
// deadline, or fallback after it was observed when it has none.
func (c *controller) end(deadline, observed time.Time) time.Time {
	if !deadline.IsZero() {
		return deadline.Add(-c.evictor.margin)
	}
	if observed.IsZero() {
		observed = c.now()
	}
	return observed.Add(c.fallback)
}

// follow starts, moves forward or stops the drain so that it matches
// rec: a drain runs while rec has a reason to drain, and ends at the
// earliest end of those reasons. A new reason that ends earlier than the
// drain under way (a Terminate after a Maintenance) starts it again, so
// that grace periods shrink to the new deadline; one that ends later
// changes nothing.
func (c *controller) follow(ctx context.Context, rec record) {
	c.last = rec
	var end time.Time
	for _, r := range rec.Reasons {
		if !r.Drain {
			continue
		}
		e, ok := c.ends[key(r.Source, r.Event)]
		if !ok {
			e = c.end(r.Deadline, time.Time{})
			c.ends[key(r.Source, r.Event)] = e
		}
		if end.IsZero() || e.Before(end) {
			end = e
		}
	}
	switch {
	case end.IsZero():
		c.stopDrain()
	case c.drain == nil || end.Before(c.drain.end):
		c.stopDrain()
		c.startDrain(ctx, end, rec)
	}
}

func (c *controller) startDrain(ctx context.Context, end time.Time, rec record) {
	dctx, cancel := context.WithDeadline(ctx, end)
	d := &running{end: end, cancel: cancel, done: make(chan struct{})}
	c.drain = d
	deadline := end.Add(c.evictor.margin)
	log := c.log.With("drain", rec.String())
	go func() {
		defer close(d.done)
		defer cancel()
		rep, err := c.evictor.drain(dctx, deadline, log)
		switch {
		case err != nil && dctx.Err() != nil:
			log.Warn("kubedrain: drain stopped", "err", err)
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

// update runs kube.update until it succeeds, trying again after errors
// that may pass (the API server unreachable or overloaded), with
// backoff, until ctx is done or, for an imminent notice, its drain ends.
// Errors that will not pass (forbidden, the node gone) end it at once.
func (c *controller) update(ctx context.Context, nt termsig.Notice, change func(*record, *corev1.Node)) (update, error) {
	if nt.Kind.Imminent() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, c.end(nt.Deadline, nt.Observed))
		defer cancel()
	}
	wait := c.retry
	for {
		up, err := c.kube.update(ctx, change)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return up, err
		}
		c.log.Warn("kubedrain: node update failed, trying again", "err", err, "in", wait)
		t := time.NewTimer(jitter(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return up, err
		case <-t.C:
		}
		wait = min(2*wait, c.evictor.maxBackoff)
	}
}

// transient reports whether err may pass by itself.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // the network
	}
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsNotFound(err),
		apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err):
		return false
	}
	return true
}

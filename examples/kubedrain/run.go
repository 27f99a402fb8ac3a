package main

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/termsig/termsig"
)

// recheckEvery is how often reconcile looks again at reasons it could not
// settle because their source had not heard from its origin yet.
const recheckEvery = 10 * time.Second

// run handles notices until ctx is done or notices is closed, then stops
// the drain under way. Once ready is closed (every source has had its
// first look) it reconciles the node's record with what the sources
// said, so that a kubedrain restarted while a notice went away lifts a
// cordon that no longer has a reason.
func (c *controller) run(ctx context.Context, notices <-chan termsig.Notice, ready <-chan struct{}) {
	defer func() {
		c.stopDrain()
		if c.timer != nil {
			c.timer.Stop()
		}
		c.releasing.Wait()
	}()
	var recheck <-chan time.Time
	heartbeat := c.srv.Heartbeat() // nil without probes: never ready
	for {
		c.srv.Tick()
		select {
		case <-ctx.Done():
			return
		case <-heartbeat:
			// A turn for /healthz: the loop is alive.
		case nt, ok := <-notices:
			if !ok {
				return
			}
			c.handle(ctx, nt)
		case <-ready:
			ready = nil
			// What the first looks found is on notices by now; handle
			// it before deciding what no longer holds.
			if !c.handlePending(ctx, notices) {
				return
			}
			if c.reconcile(ctx) {
				t := time.NewTicker(recheckEvery)
				defer t.Stop()
				recheck = t.C
			}
		case <-c.drainOverC():
			c.drainOver(c.drain)
		case <-recheck:
			if !c.reconcile(ctx) {
				recheck = nil
			}
		case <-c.retryC:
			if up, err := c.flush(ctx); err == nil {
				if up.cordoned {
					c.kube.event(ctx, corev1.EventTypeWarning, "TerminationNotice", "Cordon", up.rec.String())
				}
				c.report(ctx, up, "a node update tried again")
			}
		}
	}
}

// handlePending handles the notices already waiting on notices. It
// returns false if notices is closed.
func (c *controller) handlePending(ctx context.Context, notices <-chan termsig.Notice) bool {
	for {
		select {
		case nt, ok := <-notices:
			if !ok {
				return false
			}
			c.handle(ctx, nt)
		default:
			return true
		}
	}
}

// reconcile drops from the node's record the reasons of an earlier run
// that this run has not seen: advice whose source has since heard from
// its origin (so it would have said so if the advice still held), and
// imminent notices of an earlier boot of the node (the machine went
// through the stop or reboot and is back). It reports whether advice is
// left that it could not settle yet, to be looked at again.
func (c *controller) reconcile(ctx context.Context) (again bool) {
	var dropped, kept []reason
	// One reconcile waits at most: the next replaces it (see write).
	up, err := c.write(ctx, pending{key: "\x00reconcile", apply: func(rec *record, node *corev1.Node) {
		dropped, kept, again = nil, nil, false
		rec.Reasons = slices.DeleteFunc(rec.Reasons, func(r reason) bool {
			switch {
			case c.view.has(r.Source, r.Event):
				return false
			case r.Kind.Imminent():
				boot := node.Status.NodeInfo.BootID
				if rec.BootID != "" && boot != "" && boot != rec.BootID {
					dropped = append(dropped, r)
					return true
				}
				kept = append(kept, r)
				return false
			case c.healthy == nil || c.healthy(r.Source):
				dropped = append(dropped, r)
				return true
			}
			again = true
			return false
		})
	}})
	if err != nil {
		return transient(err)
	}
	for _, r := range kept {
		if c.warned[key(r.Source, r.Event)] || r.Lifted {
			continue
		}
		c.warned[key(r.Source, r.Event)] = true
		c.log.Warn("kubedrain: the node stays cordoned for an imminent notice of this boot that no longer shows; "+
			"kubectl uncordon lifts it (kubedrain then removes its taint)", "reason", r.String())
	}
	if len(dropped) > 0 {
		c.report(ctx, up, "no longer holds: "+(&record{Reasons: dropped}).String())
	}
	return again
}

// healthyIn returns a function that says whether a source of n has heard
// from its origin and reports no error. A source that is not in n (the
// sources were changed between runs) can never clear its advice, so it
// counts as healthy: its reasons are dropped.
func healthyIn(n *termsig.Notifier) func(string) bool {
	return func(source string) bool {
		for _, s := range n.Status() {
			if s.Name == source {
				return s.State == termsig.StateRunning && s.Err == nil && !s.LastHeard.IsZero()
			}
		}
		return true
	}
}

//go:build linux

package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/termsig/termsig"
)

// register removes stale registrations of this runner's name, left by a
// runner that died without unregistering, and registers. After a re-exec
// it keeps its registration instead. It retries until -register-timeout;
// an imminent notice meanwhile ends the runner cleanly, as there is
// nothing to clean up yet.
func (r *runner) register() (id string, code int, ok bool) {
	give := time.Now().Add(r.cfg.registerTimeout)
	wait := 100 * time.Millisecond
	for {
		id, err := r.tryRegister()
		if err == nil {
			return id, 0, true
		}
		r.warn("registering", err)
		if time.Now().After(give) {
			r.tl.Printf("could not register within %v: %v; exit %d", r.cfg.registerTimeout, err, exitStartup)
			return "", exitStartup, false
		}
		t := time.NewTimer(wait)
		select {
		case nt := <-r.notices:
			t.Stop()
			if nt.Kind.Imminent() {
				return "", r.leaveBeforeRegistering(nt), false
			}
			r.tl.Printf("notice ignored while registering: %v", nt)
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// tryRegister makes one attempt at what register does.
func (r *runner) tryRegister() (string, error) {
	var ids []string
	err := r.call(func(ctx context.Context) (err error) {
		ids, err = r.svc.Lookup(ctx, r.cfg.name)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("looking up %q: %w", r.cfg.name, err)
	}
	keep := r.cfg.resumeID != "" && slices.Contains(ids, r.cfg.resumeID)
	if err := r.removeStale(ids, keep); err != nil {
		return "", err
	}
	if keep {
		r.tl.Printf("resumed registration %s after re-exec", r.cfg.resumeID)
		return r.cfg.resumeID, nil
	}
	var id string
	err = r.call(func(ctx context.Context) (err error) {
		id, err = r.svc.Register(ctx, r.cfg.name, r.cfg.labels)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("registering %q: %w", r.cfg.name, err)
	}
	r.tl.Printf("registered as %s", id)
	return id, nil
}

// removeStale removes the registrations ids of this runner's name, but for
// the one being resumed if keep.
func (r *runner) removeStale(ids []string, keep bool) error {
	for _, id := range ids {
		if keep && id == r.cfg.resumeID {
			continue
		}
		if err := r.call(func(ctx context.Context) error { return r.svc.Remove(ctx, id) }); err != nil {
			return fmt.Errorf("removing stale registration %s: %w", id, err)
		}
		r.tl.Printf("removed stale registration %s of %q (left by a runner that did not unregister; its job is re-queued)", id, r.cfg.name)
	}
	return nil
}

// leaveBeforeRegistering handles an imminent notice that comes before the
// runner is registered: there is nothing to clean up, unless this runner
// was resuming the registration of the image it replaced.
func (r *runner) leaveBeforeRegistering(nt termsig.Notice) int {
	r.tl.mark(nt.Observed)
	r.tl.Printf("notice before registering: %v", nt)
	if r.cfg.resumeID == "" {
		r.tl.Printf("nothing to clean up; exit %d", exitClean)
		return exitClean
	}
	deadline := r.deadlineOf(nt)
	err := retryUntil(deadline, func(ctx context.Context) error { return r.svc.Remove(ctx, r.cfg.resumeID) })
	if err != nil {
		r.tl.Printf("could not unregister runner %s before the deadline: %v; exit %d", r.cfg.resumeID, err, exitUnregister)
		return exitUnregister
	}
	r.tl.Printf("unregistered runner %s; exit %d", r.cfg.resumeID, exitClean)
	return exitClean
}

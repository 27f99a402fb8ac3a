package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
)

// discard is the logger of every termsig source and Notifier under test:
// what they log is not measured.
var discard = slog.New(slog.DiscardHandler)

// A sighting is a value that a client under test has seen, stamped when
// its code saw it.
type sighting struct {
	value string
	at    time.Time
}

// A watch is a client under test, running. Its goroutines report what the
// client sees on seen; stop ends them.
type watch struct {
	seen chan sighting
	halt func() // makes the client's goroutines return
	wg   sync.WaitGroup
}

// newWatch returns a watch whose client is stopped by halt.
func newWatch(halt func()) *watch {
	return &watch{seen: make(chan sighting, 64), halt: halt}
}

// report hands v to the trial, stamped now. It never blocks: with the
// buffer full it drops v. The trials drain the buffer before each change,
// so they lose nothing; a client that is only counted (the spin stage)
// fills it and goes on.
func (w *watch) report(v string) {
	select {
	case w.seen <- sighting{v, time.Now()}:
	default:
	}
}

// stop stops the client and waits for its goroutines.
func (w *watch) stop() {
	w.halt()
	w.wg.Wait()
}

// drain discards what the client has seen so far.
func (w *watch) drain() {
	for {
		select {
		case <-w.seen:
		default:
			return
		}
	}
}

// next waits up to timeout for the client to see v, skipping other
// values, and returns when it saw it.
func (w *watch) next(ctx context.Context, v string, timeout time.Duration) (time.Time, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	last := "nothing"
	for {
		select {
		case s := <-w.seen:
			if s.value == v {
				return s.at, nil
			}
			last = fmt.Sprintf("%q", s.value)
		case <-t.C:
			return time.Time{}, fmt.Errorf("%q not seen within %v (last seen: %s)", v, timeout, last)
		case <-ctx.Done():
			return time.Time{}, context.Cause(ctx)
		}
	}
}

// notifierWatch watches n: each notice for which value returns true is
// reported as that value. stop stops n.
func notifierWatch(n *termsig.Notifier, value func(termsig.Notice) (string, bool)) *watch {
	w := newWatch(n.Stop)
	w.wg.Go(func() {
		for nt := range n.C() { // closed by Stop
			if v, ok := value(nt); ok {
				w.report(v)
			}
		}
	})
	return w
}

// pause waits for d, or until ctx ends and returns its cause.
func pause(ctx context.Context, d time.Duration) error {
	if !backoff.Sleep(ctx, d) {
		return context.Cause(ctx)
	}
	return nil
}

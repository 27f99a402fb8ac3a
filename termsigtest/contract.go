package termsigtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/termsig/termsig"
)

// The bounds of TestSource.
const (
	// readyWithin is how long a source may take after Watch starts to
	// call Run.Ready, and to send a notice after notify.
	readyWithin = 10 * time.Second
	// stopWithin is how long a source's Watch may take to return once its
	// context is done.
	stopWithin = 2 * time.Second
)

// msgLateSend is what a Notifier logs for a notice sent after its
// source's Watch returned.
const msgLateSend = "termsig: source sent a notice after its Watch returned; notice dropped"

var validName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// TestSource checks that a source keeps the contract of [termsig.Source],
// as testing/fstest.TestFS does for a file system. It runs sources that
// newSource returns under a Notifier, each in a subtest, and fails t when
// a source
//
//   - has a name that is not short, stable and lower-case: 1 to 32
//     lower-case letters, digits and '-', starting with a letter, the same
//     at every call;
//   - does not call Run.Ready within 10 s of Watch starting;
//   - returns before its context is done, whatever it returns (an error
//     wrapping ErrUnavailable included: the check needs a source that
//     works where the test runs), or returns something other than nil or
//     the context's error once it is done; panics, or calls
//     runtime.Goexit (as t.FailNow does) instead of returning;
//   - does not return within 2 s of its context ending, when it has just
//     started or once it is watching;
//   - sends a notice after its Watch returned;
//   - leaves a goroutine behind once its Watch returned;
//   - given notify: sends no notice within 10 s of notify, or one whose
//     Kind is not valid.
//
// newSource is called once per subtest with that subtest's t, so that it
// can start what the source watches (a fake metadata server, with
// t.Cleanup to stop it) and return a new source for it. It also returns
// notify, a function that makes the source produce a notice: post a spot
// interruption to an imdstest.Server, send the process a signal, press an
// acpitest power button. TestSource calls notify once the source is ready.
// With a nil notify, the checks that need a notice are left out (and
// t.Log says so).
//
// TestSource looks for goroutines left behind as go.uber.org/goleak does,
// so it must not run in parallel with other tests, and what newSource
// starts must be running before it returns. An *http.Client that
// newSource hands to the source, or that notify uses, keeps idle
// connections whose goroutines count as left behind: give it a Transport
// with DisableKeepAlives, or let the source make its own.
func TestSource(t *testing.T, newSource func(t *testing.T) (src termsig.Source, notify func())) {
	t.Helper()
	t.Run("Name", func(t *testing.T) {
		src, _ := newSource(t)
		name := src.Name()
		if !validName.MatchString(name) {
			t.Errorf("Name() = %q: want 1 to 32 lower-case letters, digits and '-', starting with a letter", name)
		}
		for range 3 {
			if again := src.Name(); again != name {
				t.Fatalf("Name() = %q, then %q: a name must be stable", name, again)
			}
		}
	})
	t.Run("Notice", func(t *testing.T) {
		src, notify := newSource(t)
		if notify == nil {
			t.Log("no notify function: the notice is not checked")
		}
		c := start(t, src)
		c.waitReady(t)
		if notify != nil {
			notify()
			select {
			case <-c.ended:
				c.failEarly(t)
				t.Fatalf("%s: Watch returned after notify, without a notice", c.name)
			case nt := <-c.n.C():
				if nt.Source != src.Name() {
					t.Errorf("notice from %q, want %q", nt.Source, src.Name())
				}
				if _, err := nt.Kind.MarshalText(); err != nil {
					t.Errorf("notice %v: %v", nt, err)
				}
			case <-time.After(readyWithin):
				t.Fatalf("no notice within %v of notify", readyWithin)
			}
		}
		if src.Name() != c.name {
			t.Errorf("Name() changed while watching: %q, then %q", c.name, src.Name())
		}
		c.stop(t)
	})
	t.Run("StopAtOnce", func(t *testing.T) {
		src, _ := newSource(t)
		c := start(t, src)
		c.stop(t)
	})
	t.Run("StopWhileWatching", func(t *testing.T) {
		src, _ := newSource(t)
		c := start(t, src)
		c.waitReady(t)
		c.stop(t)
	})
}

// checked runs a source under a Notifier of its own and records how it
// ended.
type checked struct {
	src  termsig.Source
	name string
	n    *termsig.Notifier
	logs *lateSends
	// begun is closed when Watch starts; ended when it has returned,
	// with early or returned set.
	begun, ended chan struct{}
	early        error     // what Watch returned before ctx was done, or errNil
	returned     time.Time // when Watch returned after ctx was done
	late         error     // what it returned then
	abandoned    bool      // Watch panicked or called runtime.Goexit
	panicked     any       // what it panicked with
	prior        []goleak.Option
}

var errNil = fmt.Errorf("nil")

func start(t *testing.T, src termsig.Source) *checked {
	t.Helper()
	c := &checked{
		src:   src,
		name:  src.Name(),
		logs:  &lateSends{},
		begun: make(chan struct{}),
		ended: make(chan struct{}),
		prior: []goleak.Option{goleak.IgnoreCurrent()},
	}
	c.n = termsig.Config{Logger: slog.New(c.logs)}.New(watcher{c})
	t.Cleanup(func() {
		// Bounded: a source that never returns fails the test, and is
		// left running, rather than hanging it.
		ctx, cancel := context.WithTimeout(context.Background(), stopWithin)
		defer cancel()
		if err := c.n.Shutdown(ctx); err != nil {
			t.Errorf("%s: Watch still running %v after its context ended; left running", c.name, stopWithin)
		}
	})
	return c
}

// watcher is the Source the Notifier runs: src, watched and timed.
type watcher struct{ c *checked }

func (w watcher) Name() string { return w.c.name }

func (w watcher) Traits() termsig.Traits {
	if d, ok := w.c.src.(termsig.Describer); ok {
		return d.Traits()
	}
	return termsig.Traits{}
}

func (w watcher) Watch(ctx context.Context, r *termsig.Run) error {
	c := w.c
	close(c.begun)
	returned := false
	defer func() {
		if returned {
			return
		}
		c.abandoned, c.panicked = true, recover()
		close(c.ended)
		if c.panicked != nil {
			panic(c.panicked) // for the Notifier to record
		}
	}()
	err := c.src.Watch(ctx, r)
	returned = true
	if ctx.Err() == nil {
		c.early = err
		if err == nil {
			c.early = errNil
		}
	} else {
		c.returned, c.late = time.Now(), err
	}
	close(c.ended)
	return err
}

func (c *checked) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-c.n.Ready():
	case <-time.After(readyWithin):
		t.Fatalf("%s: Run.Ready not called within %v of Watch starting", c.name, readyWithin)
	}
	select {
	case <-c.ended:
		c.failEarly(t)
	default:
	}
}

func (c *checked) failEarly(t *testing.T) {
	t.Helper()
	switch {
	case c.abandoned && c.panicked != nil:
		t.Fatalf("%s: Watch panicked: %v", c.name, c.panicked)
	case c.abandoned:
		t.Fatalf("%s: Watch called runtime.Goexit (t.FailNow?) instead of returning", c.name)
	case c.early == errNil:
		t.Fatalf("%s: Watch returned nil before its context was done", c.name)
	case c.early != nil:
		t.Fatalf("%s: Watch returned before its context was done: %v", c.name, c.early)
	}
}

// stop stops the Notifier and checks how the source ended.
func (c *checked) stop(t *testing.T) {
	t.Helper()
	<-c.begun
	select {
	case <-c.ended:
		c.failEarly(t)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopWithin)
	defer cancel()
	stopped := time.Now() // Shutdown cancels the source's context first
	if err := c.n.Shutdown(ctx); err != nil {
		t.Fatalf("%s: Watch did not return within %v of its context ending", c.name, stopWithin)
	}
	<-c.ended
	c.failEarly(t)
	if c.late != nil && !errors.Is(c.late, context.Canceled) {
		t.Errorf("%s: Watch returned %v once its context was done, want nil or the context's error", c.name, c.late)
	}
	if took := c.returned.Sub(stopped); took > stopWithin {
		t.Errorf("%s: Watch returned %v after its context ended, want at most %v", c.name, took, stopWithin)
	}
	if err := goleak.Find(c.prior...); err != nil {
		t.Errorf("%s: goroutines left behind after Watch returned: %v", c.name, err)
	}
	if n := c.logs.count(); n > 0 {
		t.Errorf("%s: %d notices sent after Watch returned", c.name, n)
	}
	if st := c.n.Status(); len(st) == 1 && st[0].State == termsig.StateFailed {
		t.Errorf("%s: failed: %v", c.name, st[0].Err)
	}
}

// lateSends is a slog.Handler that counts the Notifier's lines about
// notices sent after Watch returned.
type lateSends struct {
	mu sync.Mutex
	n  int
}

func (l *lateSends) Enabled(context.Context, slog.Level) bool { return true }

func (l *lateSends) Handle(_ context.Context, r slog.Record) error {
	if r.Message == msgLateSend {
		l.mu.Lock()
		l.n++
		l.mu.Unlock()
	}
	return nil
}

func (l *lateSends) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lateSends) WithGroup(string) slog.Handler      { return l }

func (l *lateSends) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

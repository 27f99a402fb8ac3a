package termsig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// A Run is one source's watch inside a [Notifier]: what the Notifier hands
// to [Source.Watch] so that the source can talk back. Its methods are safe
// for concurrent use by the goroutines of Watch. Once Watch has returned
// they do nothing, and Send refuses the notice.
type Run struct {
	n     *Notifier
	src   Source
	name  string
	local bool // Traits().Local

	ready     chan struct{} // closed by Ready, or when Watch returns
	readyOnce sync.Once
	done      chan struct{} // closed when Watch has returned

	logMu   sync.Mutex // held while a health report is logged
	mu      sync.Mutex
	state   State
	err     error
	heard   time.Time // when the source last sent a notice or reported
	notices int
	ended   bool // Watch has returned
}

// newRun returns the run of s, named name, with traits tr.
func newRun(n *Notifier, s Source, name string, tr Traits) *Run {
	return &Run{n: n, src: s, name: name, local: tr.Local, state: StateRunning,
		ready: make(chan struct{}), done: make(chan struct{})}
}

// msgUnwritableDeadline is logged for a notice whose Deadline Send drops.
const msgUnwritableDeadline = "termsig: a notice's deadline is outside the years 0 to 9999 (UTC); the notice is sent without one"

// writable reports whether t is zero or a time that RFC 3339 and
// encoding/json can write: its year in UTC is 0 to 9999.
func writable(t time.Time) bool {
	y := t.UTC().Year()
	return t.IsZero() || y >= 0 && y <= 9999
}

// Send puts n on [Notifier.C] and returns nil, or returns the error of ctx
// if ctx ends first, or [context.Canceled] if the Notifier stops first; a
// source's Watch usually returns that error. It waits while C is full, so
// that a slow consumer holds the source back without a notice being lost.
// A notice sent when C has room is delivered even if ctx has ended.
//
// Send stamps n: its Source is the source's name, and a zero Observed
// becomes the current time. Once Watch has returned, Send drops n, logs
// the broken contract at level Error and returns an error; so does a Send
// still waiting for room when Watch returns. A Deadline or Observed whose
// year in UTC is not 0 to 9999 (which RFC 3339 cannot write: a server can
// name any time) is dropped, the Deadline with a Warn line: the notice is
// delivered without it; so is a HoldLimit.
func (r *Run) Send(ctx context.Context, n Notice) error {
	n.Source = r.name
	nt := r.n
	if !writable(n.Observed) {
		n.Observed = time.Time{}
	}
	if n.Observed.IsZero() {
		n.Observed = time.Now()
	}
	if !writable(n.Deadline) {
		// A server can name any time; one that RFC 3339 cannot write
		// would make the notice fail to encode (termsig print, a log
		// pipeline), and no drain waits for it: the notice goes without.
		nt.log.Warn(msgUnwritableDeadline, "source", r.name, "deadline", n.Deadline.String(), "raw", n.Raw)
		n.Deadline = time.Time{}
	}
	if !writable(n.HoldLimit) {
		n.HoldLimit = time.Time{}
	}
	nt.sendMu.RLock()
	defer nt.sendMu.RUnlock()
	if r.returned() || nt.closed {
		nt.log.Error(msgLateSend, "source", r.name, "notice", n)
		return errLateSend
	}
	// Counted before the send, so that a consumer that has the notice
	// finds it in Status; taken back if it is not delivered.
	r.count(1)
	select {
	case nt.c <- n:
		r.delivered(n)
		return nil
	default:
	}
	select {
	case nt.c <- n:
		r.delivered(n)
		return nil
	case <-ctx.Done():
		err := ctx.Err()
		if nt.ctx.Err() != nil {
			err = r.lastChance(n)
		} else {
			r.count(-1)
		}
		return err
	case <-nt.ctx.Done():
		return r.lastChance(n)
	case <-r.done:
		// Watch returned while this Send waited: a goroutine of the
		// source outlived it.
		r.count(-1)
		nt.log.Error(msgLateSend, "source", r.name, "notice", n)
		return errLateSend
	}
}

// lastChance puts n in C's buffer if there is room, and otherwise drops
// it: the Notifier is stopping and the consumer asked for that.
func (r *Run) lastChance(n Notice) error {
	select {
	case r.n.c <- n:
		r.delivered(n)
		return nil
	default:
		r.count(-1)
		r.n.log.Warn("termsig: notice dropped at Stop: nobody was reading", "source", r.name, "notice", n)
		return context.Canceled
	}
}

// msgLateSend is logged for a Send after Watch returned;
// termsigtest.TestSource looks for it.
const msgLateSend = "termsig: source sent a notice after its Watch returned; notice dropped"

var errLateSend = errors.New("termsig: Send after Watch returned")

// Ready says that the source has had its first look at its origin (see
// [Source]). The notices the source sent before are on C already, so whoever
// finds [Notifier.Ready] closed finds them too. Calling it more than once
// does nothing.
func (r *Run) Ready() { r.markReady() }

// Report tells the Notifier that the source has a transient failure that
// it is retrying, such as an unreachable metadata service, or, with nil,
// that it works again and has just heard from its origin. It shows in
// [Notifier.Status]; the Notifier logs each change (not each call), so a
// source may call it after every attempt. An error's text should be stable
// (no request ids, no URLs that differ by request), since a new text is a
// change.
func (r *Run) Report(err error) {
	// logMu keeps the log lines of one source in the order of its
	// reports; mu is not held while logging, so that a log handler may
	// call Status.
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.mu.Lock()
	if r.state != StateRunning {
		r.mu.Unlock()
		return
	}
	prev := r.err
	changed := (prev == nil) != (err == nil) || (err != nil && prev.Error() != err.Error())
	r.err = err
	if err == nil {
		r.heard = time.Now()
	}
	r.mu.Unlock()
	switch {
	case !changed:
	case err != nil:
		r.n.log.Warn("termsig: source error, retrying", "source", r.name, "err", err)
	default:
		r.n.log.Info("termsig: source healthy again", "source", r.name, "after", prev)
	}
}

// Heard tells the Notifier that the source has just heard from its origin
// (a metadata service answered), without saying anything about its
// health: [SourceStatus.LastHeard] shows it. A source that watches several
// things (paths, keys) calls it for each answer while another may still be
// failing.
func (r *Run) Heard() {
	r.mu.Lock()
	if !r.ended {
		r.heard = time.Now()
	}
	r.mu.Unlock()
}

func (r *Run) markReady() {
	r.readyOnce.Do(func() {
		r.n.mu.Lock()
		r.n.unready--
		all := r.n.unready == 0
		r.n.mu.Unlock()
		// The Notifier's first: New, which waits for r.ready, must not
		// return before Notifier.Ready says the same.
		if all {
			close(r.n.ready)
		}
		close(r.ready)
	})
}

func (r *Run) returned() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// watch runs the source's Watch and records how it ended.
func (r *Run) watch(ctx context.Context) {
	defer r.n.wg.Done()
	err := errGoexit // unless Watch returns or panics
	// Deferred, so that it runs even when Watch calls runtime.Goexit (as
	// t.FailNow in a test's source does). Status is final before Ready
	// is closed: whoever sees Ready finds it.
	defer func() {
		r.finish(ctx, err)
		r.markReady()
	}()
	r.n.log.Debug("termsig: source started", "source", r.name)
	err = r.call(ctx)
}

// call runs Watch and turns a panic into a *PanicError, so that one broken
// source does not take the program down.
func (r *Run) call(ctx context.Context) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Source: r.name, Value: v, Stack: debug.Stack()}
		}
	}()
	return r.src.Watch(ctx, r)
}

// errGoexit is the error of a source whose Watch called runtime.Goexit.
var errGoexit = errors.New("termsig: Watch exited its goroutine (runtime.Goexit) instead of returning")

// count adds d to the notices put on C, and stamps the source as heard.
func (r *Run) count(d int) {
	r.mu.Lock()
	r.notices += d
	if d > 0 {
		r.heard = time.Now()
	}
	r.mu.Unlock()
}

func (r *Run) delivered(nt Notice) {
	// Enabled first: building the line costs more than delivering the notice.
	if r.n.log.Enabled(context.Background(), slog.LevelDebug) {
		r.n.log.Debug("termsig: notice", "source", r.name, "notice", nt)
	}
}

func (r *Run) finish(ctx context.Context, err error) {
	var st State
	var pe *PanicError
	switch {
	case errors.As(err, &pe):
		st = StateFailed
	case errors.Is(err, ErrUnavailable):
		st = StateUnavailable
	case ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)):
		st, err = StateStopped, nil
	case err == nil:
		st = StateStopped
	default:
		st = StateFailed
	}
	// State first, log second: whoever reads the log line then finds
	// Status saying the same, and the count of platform sources that
	// watch already without this one (which one is the last to end is
	// decided here, in the order of the lines below). Under logMu, so
	// that no line of a Report comes after these.
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.mu.Lock()
	r.state, r.err, r.ended = st, err, true
	r.mu.Unlock()
	close(r.done)
	r.n.mu.Lock()
	if !r.local {
		r.n.platform--
		r.n.platformRan = r.n.platformRan || st != StateUnavailable
	}
	lastPlatform := !r.local && r.n.platform == 0 && r.n.ctx.Err() == nil
	ran := r.n.platformRan
	r.n.mu.Unlock()
	if pe != nil {
		r.n.log.Error("termsig: source panicked", "source", r.name, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
	}
	switch {
	case st == StateUnavailable:
		r.n.log.Info("termsig: source unavailable", "source", r.name, "err", err)
	case st == StateFailed:
		r.n.log.Error("termsig: source failed", "source", r.name, "err", err)
	case ctx.Err() != nil:
		r.n.log.Debug("termsig: source stopped", "source", r.name)
	default:
		r.n.log.Warn("termsig: source returned before Stop", "source", r.name)
	}

	switch {
	case !lastPlatform:
	case ran:
		r.n.log.Error("termsig: no platform source is watching any more", "last", r.name,
			"unheard", "spot interruptions, preemptions, maintenance and power-button presses")
	default:
		// None of them applies here (a laptop, a container): nothing was
		// lost, but say so once.
		r.n.log.Info("termsig: no platform source applies on this host; only signals are watched")
	}
}

package termsig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of [Config].
const (
	// DefaultBuffer is the capacity of [Notifier.C] when [Config.Buffer] is
	// not set.
	DefaultBuffer = 16
	// DefaultReadyTimeout is how long [Config.New] waits at most for the
	// local [ReadyReporter] sources when [Config.ReadyTimeout] is not set.
	DefaultReadyTimeout = 2 * time.Second
	// DefaultStopTimeout is how long the stop function of [NotifyContext]
	// waits at most for the sources when [Config.StopTimeout] is not set.
	DefaultStopTimeout = 5 * time.Second
)

// Config configures a [Notifier]. The zero Config is ready to use.
type Config struct {
	// Logger receives one line per change of a source's state (started,
	// unavailable, failed, an error reported or cleared) and, at debug
	// level, every notice. Nil means slog.Default(); pass
	// slog.New(slog.DiscardHandler) to silence it.
	Logger *slog.Logger

	// Buffer is the capacity of [Notifier.C]. Values below 1 mean
	// DefaultBuffer. A full buffer is not a loss: sources wait.
	Buffer int

	// ReadyTimeout bounds how long New waits for the local
	// [ReadyReporter] sources to be set up; a source that is not ready by
	// then is logged, and New returns. Values below 1 mean
	// DefaultReadyTimeout (2 s).
	ReadyTimeout time.Duration

	// StopTimeout bounds how long the stop function of
	// [Config.NotifyContext] waits for the sources to return; a source
	// still running then is logged by name, and stop returns. Values
	// below 1 mean DefaultStopTimeout (5 s).
	StopTimeout time.Duration
}

// A Notifier runs sources and merges their notices into one channel.
//
// Create one with [New] or [Config.New]; its methods are safe for concurrent
// use.
type Notifier struct {
	c      chan Notice
	cancel context.CancelFunc
	log    *slog.Logger
	runs   []*run

	ready chan struct{} // closed when every source has had its first look
	done  chan struct{} // closed, after C, when stopped and all goroutines ended
	stop  sync.Once

	mu          sync.Mutex
	goroutines  int  // of the Notifier's, still running
	unready     int  // sources that have not had their first look
	platform    int  // live sources that are not LocalSources
	platformRan bool // one of them ended after it had worked, or failed
	stopped     bool
	finished    bool
}

// New starts every source at once and returns the Notifier that merges their
// notices. It is Config{}.New(sources...): logging to slog.Default(), a
// buffer of DefaultBuffer notices.
func New(sources ...Source) *Notifier { return Config{}.New(sources...) }

// New starts every source at once, each in its own goroutine, and returns
// the Notifier that merges their notices into [Notifier.C].
//
// Before it returns it waits for each local [ReadyReporter] (the signal
// and acpi sources are) to be set up, so that nothing those sources watch
// is missed after New returns; it waits at most c.ReadyTimeout, and never
// for the network. [Notifier.Ready] says when every source has had its
// first look.
//
// It panics if a source is nil, including a typed nil such as
// (*imds.Source)(nil). A Notifier with no sources is valid and sends
// nothing.
func (c Config) New(sources ...Source) *Notifier {
	for i, s := range sources {
		if isNil(s) {
			panic("termsig: nil Source at index " + strconv.Itoa(i))
		}
	}
	size := c.Buffer
	if size < 1 {
		size = DefaultBuffer
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{
		c:          make(chan Notice, size),
		cancel:     cancel,
		log:        log,
		ready:      make(chan struct{}),
		done:       make(chan struct{}),
		goroutines: 2 * len(sources),
		unready:    len(sources),
	}
	var local []*run // ReadyReporters that New waits for
	for _, s := range sources {
		r := &run{n: n, src: s, name: s.Name(), state: StateRunning, ready: make(chan struct{}), readyc: make(chan struct{})}
		if _, ok := s.(LocalSource); !ok {
			r.platform = true
			n.platform++
		}
		n.runs = append(n.runs, r)
		if rr, ok := s.(ReadyReporter); ok && rr.ReportsReady() {
			local = append(local, r)
		}
	}
	if len(sources) == 0 {
		close(n.ready)
	}
	for _, r := range n.runs {
		if _, ok := r.src.(ReadyReporter); !ok {
			r.markReady() // it cannot tell; it is as ready as it gets
		}
		in := make(chan Notice)
		done, forwarded := make(chan struct{}), make(chan struct{})
		go r.watch(ctx, in, done, forwarded)
		go r.forward(ctx, in, done, forwarded)
	}
	n.waitLocal(local, c.ReadyTimeout)
	return n
}

// waitLocal waits until each run in rs is ready, for at most timeout in
// all. A signal that arrives a moment after New must not find the default
// handler still in place (and kill the process with status 143); a source
// that never gets ready must not hang the program either.
func (n *Notifier) waitLocal(rs []*run, timeout time.Duration) {
	if len(rs) == 0 {
		return
	}
	if timeout < 1 {
		timeout = DefaultReadyTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for i, r := range rs {
		select {
		case <-r.ready:
		case <-t.C:
			var late []string
			for _, r := range rs[i:] {
				select {
				case <-r.ready:
				default:
					late = append(late, r.name)
				}
			}
			n.log.Warn("termsig: sources not set up in time; New returns without them", "sources", strings.Join(late, ","), "waited", timeout)
			return
		}
	}
}

// isNil reports whether s is nil or an interface holding a nil pointer,
// map, slice, function or channel.
func isNil(s Source) bool {
	if s == nil {
		return true
	}
	switch v := reflect.ValueOf(s); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// C returns the channel on which notices arrive, in the order each source
// sent them. It is buffered (see [Config.Buffer]); when it is full, sources
// wait rather than lose a notice. C is closed after [Notifier.Stop]; notices
// already in its buffer can still be received.
func (n *Notifier) C() <-chan Notice { return n.c }

// Ready returns a channel that is closed once every source has had its
// first look at its origin (see [ReadyReporter]) or has ended: the signal
// handlers are installed, the power-button subscriptions are open, each
// metadata service has answered or failed once. A program that must not
// start work on a host that is already going away (a spot instance whose
// interruption notice is already posted) waits for it, with a timeout of
// its own, before it takes the first job; it keeps receiving from C
// meanwhile, since a source's Ready waits, as its sends do, until the
// notices it sent before are on C. What the first looks found is on C by
// the time Ready is closed. Ready is closed at once for a Notifier with no
// sources, and at the latest when every source has returned (after Stop).
func (n *Notifier) Ready() <-chan struct{} { return n.ready }

// Stop cancels every source and returns once all of them have returned and
// the Notifier's goroutines have ended. After Stop returns no notice is sent
// on C, and C is closed. Stop does not wait for the consumer of C: a notice
// that a source handed over while nobody was reading is put in C's buffer
// if there is room, and otherwise dropped (and logged), since the consumer
// asked to stop.
//
// Stop is Shutdown(context.Background()): it waits for the sources as long
// as they take, so it is as prompt as their Watch methods are (see
// [Source]). Stop is idempotent and safe to call from several goroutines;
// every call returns only after the sources have returned.
func (n *Notifier) Stop() { _ = n.Shutdown(context.Background()) }

// Shutdown is like [Notifier.Stop] but gives up waiting when ctx is done,
// as net/http's Server.Shutdown does. It returns nil once every source has
// returned, C is closed and no goroutine of the Notifier runs. If ctx ends
// first it returns an error that wraps ctx.Err() and names the sources
// that are still running: they have been cancelled, but their Watch has
// not returned. Their notices are no longer delivered, and C is closed once
// the last of them returns.
//
// A ctx that is already done gives the sources no time at all: Shutdown
// then returns nil only if they had all returned before.
//
// Shutdown may be called more than once, and together with Stop.
func (n *Notifier) Shutdown(ctx context.Context) error {
	n.stop.Do(func() {
		n.mu.Lock()
		n.stopped = true
		last := n.goroutines == 0
		n.mu.Unlock()
		n.cancel()
		if last {
			n.finish()
		}
	})
	select {
	case <-n.done:
		return nil
	default:
	}
	select {
	case <-n.done:
		return nil
	case <-ctx.Done():
		var running []string
		for _, r := range n.runs {
			if !r.returned() {
				running = append(running, r.name)
			}
		}
		if len(running) == 0 {
			// Every Watch has returned; only the Notifier's own
			// goroutines are finishing, which they do at once.
			<-n.done
			return nil
		}
		return &ShutdownError{Running: running, Err: ctx.Err()}
	}
}

// A ShutdownError is returned by [Notifier.Shutdown] when its context ends
// before the sources have returned.
type ShutdownError struct {
	Running []string // names of the sources whose Watch has not returned
	Err     error    // the context's error
}

func (e *ShutdownError) Error() string {
	return fmt.Sprintf("termsig: shutdown: sources still running: %s: %v", strings.Join(e.Running, ", "), e.Err)
}

// Unwrap returns e.Err.
func (e *ShutdownError) Unwrap() error { return e.Err }

// exit is called by each of the Notifier's goroutines as its last act.
func (n *Notifier) exit() {
	n.mu.Lock()
	n.goroutines--
	last := n.goroutines == 0 && n.stopped
	n.mu.Unlock()
	if last {
		n.finish()
	}
}

// finish closes C and done, once: the Notifier has stopped and its last
// goroutine is ending.
func (n *Notifier) finish() {
	n.mu.Lock()
	already := n.finished
	n.finished = true
	n.mu.Unlock()
	if !already {
		close(n.c)
		close(n.done)
	}
}

// Status returns the state of every source, in the order they were given
// to New.
func (n *Notifier) Status() []SourceStatus {
	st := make([]SourceStatus, len(n.runs))
	for i, r := range n.runs {
		r.mu.Lock()
		st[i] = SourceStatus{
			Name:      r.name,
			State:     r.state,
			Err:       r.err,
			LastHeard: r.heard,
			Notices:   r.notices,
		}
		r.mu.Unlock()
	}
	return st
}

// A State is the state of one source in a [Notifier].
type State uint8

// The states of a source.
const (
	// StateRunning: Watch is running.
	StateRunning State = iota + 1
	// StateUnavailable: Watch returned an error wrapping ErrUnavailable;
	// the source does not apply to this host.
	StateUnavailable
	// StateFailed: Watch returned another error before Stop, or panicked.
	StateFailed
	// StateStopped: Watch returned because of Stop, or returned nil early.
	StateStopped
)

func (s State) String() string {
	switch s {
	case StateRunning:
		return "running"
	case StateUnavailable:
		return "unavailable"
	case StateFailed:
		return "failed"
	case StateStopped:
		return "stopped"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// SourceStatus describes one source of a [Notifier].
type SourceStatus struct {
	Name  string
	State State
	// Err is the error Watch returned (a [*PanicError] if it panicked),
	// or, while it runs, the last error it reported with ReportError (nil
	// once it reported itself healthy again).
	Err error
	// LastHeard is when the source last heard from its origin: it sent
	// a notice, or called [Heard] or [ReportHealthy]. The zero time means
	// never (a source that is failing, or that does not say).
	LastHeard time.Time
	// Notices counts the notices of this source that were put on C.
	Notices int
}

// A PanicError is the error of a source whose Watch panicked.
type PanicError struct {
	Source string
	Value  any    // what Watch panicked with
	Stack  []byte // the goroutine's stack at the panic
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("termsig: source %s panicked: %v", e.Source, e.Value)
}

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// A run is one source inside a Notifier.
type run struct {
	n        *Notifier
	src      Source
	name     string
	platform bool // not a LocalSource

	ready     chan struct{} // closed by Ready, or when Watch returns
	readyOnce sync.Once
	// readyc carries Ready to forward, so that the source is marked ready
	// only after the notices it sent before are on C: a consumer that
	// finds Ready closed then finds them too.
	readyc chan struct{}

	logMu   sync.Mutex // held while a health report is logged
	mu      sync.Mutex
	state   State
	err     error
	heard   time.Time // when the source last sent a notice or reported
	notices int
	ended   bool // Watch has returned
}

// requestReady marks the run ready once forward has put every notice the
// source sent before on C. It returns early if ctx ends.
func (r *run) requestReady(ctx context.Context) {
	select {
	case <-r.ready:
	case r.readyc <- struct{}{}:
	case <-ctx.Done():
	}
}

func (r *run) markReady() {
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

func (r *run) returned() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// watch runs the source's Watch and records how it ended. in is the
// channel the source sends on; done is closed when Watch has returned, so
// that forward ends (in itself is never closed: a source that broke its
// contract and sent after returning would otherwise panic); forwarded is
// closed by forward when it has ended.
func (r *run) watch(ctx context.Context, in chan Notice, done, forwarded chan struct{}) {
	defer r.n.exit()
	err := errGoexit // unless Watch returns or panics
	// Deferred, so that it runs even when Watch calls runtime.Goexit (as
	// t.FailNow in a test's source does).
	defer func() {
		r.finish(ctx, err)
		close(done)
		// The notices the source sent are on C before Ready is closed,
		// and Status is final: whoever sees Ready finds both.
		<-forwarded
		r.markReady()
	}()
	r.n.log.Debug("termsig: source started", "source", r.name)
	err = r.call(context.WithValue(ctx, runKey{}, r), in)
}

// call runs Watch and turns a panic into a *PanicError, so that one broken
// source does not take the program down.
func (r *run) call(ctx context.Context, in chan Notice) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Source: r.name, Value: v, Stack: debug.Stack()}
			r.n.log.Error("termsig: source panicked", "source", r.name, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
			err = pe
		}
	}()
	return r.src.Watch(ctx, in)
}

// errGoexit is the error of a source whose Watch called runtime.Goexit.
var errGoexit = errors.New("termsig: Watch exited its goroutine (runtime.Goexit) instead of returning")

// forward moves notices from the source to C. A source waits in its send
// until the notice is taken, and forward waits until C has room, so a slow
// consumer holds back every source without a notice being dropped.
func (r *run) forward(ctx context.Context, in <-chan Notice, done <-chan struct{}, forwarded chan<- struct{}) {
	defer r.n.exit()
	defer close(forwarded)
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-r.readyc:
			r.markReady()
		case nt := <-in:
			if nt.Source == "" {
				nt.Source = r.name
			}
			if nt.Observed.IsZero() {
				nt.Observed = time.Now()
			}
			// Counted before the send, so that a consumer that has the
			// notice finds it in Status; taken back if it is dropped.
			r.count(1)
			select {
			case r.n.c <- nt:
				r.delivered(nt)
			case <-ctx.Done():
				select {
				case r.n.c <- nt:
					r.delivered(nt)
				default:
					r.count(-1)
					r.n.log.Warn("termsig: notice dropped at Stop: nobody was reading", "source", r.name, "notice", nt)
				}
				return
			}
		}
	}
}

// count adds d to the notices put on C, and stamps the source as heard.
func (r *run) count(d int) {
	r.mu.Lock()
	r.notices += d
	if d > 0 {
		r.heard = time.Now()
	}
	r.mu.Unlock()
}

func (r *run) delivered(nt Notice) {
	// Enabled first: building the line costs more than delivering the notice.
	if r.n.log.Enabled(context.Background(), slog.LevelDebug) {
		r.n.log.Debug("termsig: notice", "source", r.name, "notice", nt)
	}
}

func (r *run) report(err error) {
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

func (r *run) heardNow() {
	r.mu.Lock()
	r.heard = time.Now()
	r.mu.Unlock()
}

func (r *run) finish(ctx context.Context, err error) {
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
	// decided here, in the order of the lines below).
	r.mu.Lock()
	r.state, r.err, r.ended = st, err, true
	r.mu.Unlock()
	r.n.mu.Lock()
	if r.platform {
		r.n.platform--
		r.n.platformRan = r.n.platformRan || st != StateUnavailable
	}
	lastPlatform := r.platform && r.n.platform == 0 && !r.n.stopped
	ran := r.n.platformRan
	r.n.mu.Unlock()
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

// Release tells the source of nt that the consumer is done with it (its
// work is handed back, it has unregistered), so that the platform may go
// ahead at once (see [Releaser]): logind's delay lock is closed and the
// shutdown proceeds now rather than when the delay runs out. Call it just
// before exiting, for each imminent notice the program drained for; not
// for advice (maintenance, rebalance) unless the program wants the event
// to start now.
//
// For a notice whose source is not a Releaser (signals, most metadata
// services) it does nothing and returns nil. A notice whose Source names
// no source of n gives an error wrapping [ErrUnknownSource]. Release may
// be called after Stop. A program that uses [NotifyContext] has no
// Notifier to call it on: its stop function stops the sources, which
// closes logind's lock.
func (n *Notifier) Release(ctx context.Context, nt Notice) error {
	var errs []error
	found := false
	for _, r := range n.runs {
		if r.name != nt.Source {
			continue
		}
		found = true
		if rel, ok := r.src.(Releaser); ok {
			if err := rel.Release(ctx, nt); err != nil {
				errs = append(errs, fmt.Errorf("termsig: release %s: %w", r.name, err))
			}
		}
	}
	if !found {
		return fmt.Errorf("%w: %q", ErrUnknownSource, nt.Source)
	}
	return errors.Join(errs...)
}

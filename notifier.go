package termsig

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of [Config] and [Drain].
const (
	// DefaultBuffer is the capacity of [Notifier.C] when [Config.Buffer] is
	// not set.
	DefaultBuffer = 16
	// DefaultReadyTimeout is how long [Config.New] waits at most for the
	// sources whose first look is local (see [Traits]) when
	// [Config.ReadyTimeout] is not set.
	DefaultReadyTimeout = 2 * time.Second
	// DefaultStopTimeout is how long the stop function of [NotifyContext]
	// waits at most for the sources when [Config.StopTimeout] is not set.
	DefaultStopTimeout = 5 * time.Second
	// DefaultDrainFallback is how long the context of
	// [Notice.DrainContext] lasts after a notice without a Deadline when
	// [Drain.Fallback] is not set: the grace period of docker stop, the
	// shortest of the usual supervisors' (Kubernetes gives 30 s, systemd
	// 90 s).
	DefaultDrainFallback = 10 * time.Second
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

	// ReadyTimeout bounds how long New waits for the sources whose first
	// look is local (see [Traits]) to be set up; a source that is not
	// ready by then is logged, and New returns. Values below 1 mean
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
	ctx    context.Context // the sources' Watch context; done once stopping
	cancel context.CancelFunc
	log    *slog.Logger
	runs   []*Run
	wg     sync.WaitGroup // one per Watch still running

	ready chan struct{} // closed when every source has had its first look
	done  chan struct{} // closed, after C, when stopped and every Watch returned
	stop  sync.Once

	// sendMu is held for reading by each Send and for writing while C is
	// closed, so that no Send meets a closed channel.
	sendMu sync.RWMutex
	closed bool // C is closed; under sendMu

	mu          sync.Mutex
	unready     int  // sources that have not had their first look
	platform    int  // live sources that are not Local
	platformRan bool // one of them ended after it had worked, or failed
}

// New starts every source at once and returns the Notifier that merges their
// notices. It is Config{}.New(sources...): logging to slog.Default(), a
// buffer of DefaultBuffer notices.
func New(sources ...Source) *Notifier { return Config{}.New(sources...) }

// New starts every source at once, each in its own goroutine, and returns
// the Notifier that merges their notices into [Notifier.C].
//
// Before it returns it waits for each source whose [Traits] say that its
// first look is local (the signal and acpi sources) to call [Run.Ready], so
// that nothing those sources watch is missed after New returns; it waits
// at most c.ReadyTimeout, and never for the network. [Notifier.Ready] says
// when every source has had its first look.
//
// It panics if a source is nil, including a typed nil such as
// (*imds.Source)(nil), or if two sources have the same name: both are a
// programmer's error. A Notifier with no sources is valid and sends
// nothing.
func (c Config) New(sources ...Source) *Notifier {
	names := make([]string, len(sources))
	seen := make(map[string]int, len(sources))
	for i, s := range sources {
		if isNil(s) {
			panic("termsig: nil Source at index " + strconv.Itoa(i))
		}
		names[i] = s.Name()
		if j, dup := seen[names[i]]; dup {
			panic(fmt.Sprintf("termsig: sources at index %d and %d are both named %q", j, i, names[i]))
		}
		seen[names[i]] = i
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
		c:       make(chan Notice, size),
		ctx:     ctx,
		cancel:  cancel,
		log:     log,
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
		unready: len(sources),
	}
	var local []*Run // the runs that New waits for
	for i, s := range sources {
		var tr Traits
		if d, ok := s.(Describer); ok {
			tr = d.Traits()
		}
		r := newRun(n, s, names[i], tr)
		if !tr.Local {
			n.platform++
		}
		n.runs = append(n.runs, r)
		if tr.LocalFirstLook {
			local = append(local, r)
		}
	}
	if len(sources) == 0 {
		close(n.ready)
	}
	n.wg.Add(len(n.runs))
	for _, r := range n.runs {
		go r.watch(ctx)
	}
	n.waitLocal(local, c.ReadyTimeout)
	return n
}

// waitLocal waits until each run in rs is ready, for at most timeout in
// all. A signal that arrives a moment after New must not find the default
// handler still in place (and kill the process with status 143); a source
// that never gets ready must not hang the program either.
func (n *Notifier) waitLocal(rs []*Run, timeout time.Duration) {
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
// first look at its origin (see [Run.Ready]) or has ended: the signal
// handlers are installed, the power-button subscriptions are open, each
// metadata service has answered or failed once. A program that must not
// start work on a host that is already going away (a spot instance whose
// interruption notice is already posted) waits for it, with a timeout of
// its own, before it takes the first job; it keeps receiving from C
// meanwhile, since a source that sends waits while C is full. What the
// first looks found is on C by the time Ready is closed. Ready is closed at once for a Notifier with no
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
// not returned. Until it does, a notice it sends is put in C's buffer if
// there is room, as during Stop, and C is closed once the last of them
// returns.
//
// A ctx that is already done gives the sources no time at all: Shutdown
// then returns nil only if they had all returned before.
//
// Shutdown may be called more than once, and together with Stop.
func (n *Notifier) Shutdown(ctx context.Context) error {
	n.stop.Do(func() {
		n.cancel()
		go func() {
			n.wg.Wait()
			n.sendMu.Lock()
			n.closed = true
			close(n.c)
			n.sendMu.Unlock()
			close(n.done)
		}()
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
			// Every Watch has returned; only the closing of C is left,
			// which happens at once.
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
	// or, while it runs, the last error it reported with [Run.Report]
	// (nil once it reported itself healthy again).
	Err error
	// LastHeard is when the source last heard from its origin: it sent
	// a notice, or called [Run.Heard] or Report(nil). The zero time means
	// never (a source that is failing, or that does not say).
	LastHeard time.Time
	// Notices counts the notices of this source that were put on C, or
	// are being put on it: a Send that waits for room counts already, and
	// is taken back if it gives up.
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

// Release tells the source of nt that the consumer is done with it (its
// work is handed back, it has unregistered), so that the platform may go
// ahead at once (see [Releaser]): logind's delay lock is closed and the
// shutdown proceeds now rather than when the delay runs out; Azure's event
// is acknowledged and starts now rather than at its NotBefore. Call it just
// before exiting, for each imminent notice the program drained for; not
// for advice (maintenance, rebalance) unless the program wants the event
// to start now.
//
// Release blocks until the source's release has succeeded or ctx is done.
// That can be long: azure's acknowledgement is an HTTP request, retried
// until Azure takes it or the event leaves the document, which against a
// failing metadata service is never, and on a real VM can be until the VM
// is gone. So bound it; a release that gives up costs nothing but the
// wait, since the platform then goes ahead at the time it had set:
//
//	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
//	defer cancel()
//	if err := n.Release(rctx, nt); err != nil {
//		log.Print(err)
//	}
//
// For a notice whose source is not a Releaser (signals, most metadata
// services) it does nothing and returns nil. A notice whose Source names
// no source of n gives an error wrapping [ErrUnknownSource]. Release may
// be called after Stop. A program that uses [NotifyContext] has no
// Notifier to call it on: its stop function stops the sources, which
// closes logind's lock.
func (n *Notifier) Release(ctx context.Context, nt Notice) error {
	for _, r := range n.runs {
		if r.name != nt.Source {
			continue
		}
		rel, ok := r.src.(Releaser)
		if !ok {
			return nil
		}
		if err := rel.Release(ctx, nt); err != nil {
			return fmt.Errorf("termsig: release %s: %w", r.name, err)
		}
		return nil
	}
	return fmt.Errorf("%w: %q", ErrUnknownSource, nt.Source)
}

package termsig

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// DefaultBuffer is the capacity of [Notifier.C] when [Config.Buffer] is not
// set.
const DefaultBuffer = 16

// Config configures a [Notifier]. The zero Config is ready to use.
type Config struct {
	// Logger receives one line per change of a source's state (started,
	// unavailable, failed, an error reported or cleared) and, at debug
	// level, every notice. Nil means no logging, except in
	// [Config.NotifyContext], where nil means slog.Default().
	Logger *slog.Logger

	// Buffer is the capacity of [Notifier.C]. Values below 1 mean
	// DefaultBuffer. A full buffer is not a loss: sources wait.
	Buffer int
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

	wg   sync.WaitGroup
	stop sync.Once

	mu      sync.Mutex
	live    int // sources whose Watch has not returned
	stopped bool
}

// New starts every source at once and returns the Notifier that merges their
// notices. It is Config{}.New(sources...): no logging, a buffer of
// DefaultBuffer notices.
func New(sources ...Source) *Notifier { return Config{}.New(sources...) }

// New starts every source at once, each in its own goroutine, and returns
// the Notifier that merges their notices into [Notifier.C]. Before it
// returns it waits for each [ReadyReporter] (the signal source is one) to
// be set up, so that nothing those sources watch is missed after New
// returns. It panics if a source is nil. A Notifier with no sources is
// valid and sends nothing.
func (c Config) New(sources ...Source) *Notifier {
	for i, s := range sources {
		if s == nil {
			panic("termsig: nil Source at index " + strconv.Itoa(i))
		}
	}
	size := c.Buffer
	if size < 1 {
		size = DefaultBuffer
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{
		c:      make(chan Notice, size),
		cancel: cancel,
		log:    log,
		live:   len(sources),
	}
	for _, s := range sources {
		r := &run{n: n, src: s, name: s.Name(), state: StateRunning, ready: make(chan struct{})}
		n.runs = append(n.runs, r)
	}
	n.wg.Add(2 * len(n.runs))
	for _, r := range n.runs {
		in := make(chan Notice)
		done := make(chan struct{})
		go r.watch(ctx, in, done)
		go r.forward(ctx, in, done)
	}
	// A signal that arrives a moment after New must not find the default
	// handler still in place (and kill the process with status 143).
	for _, r := range n.runs {
		if _, ok := r.src.(ReadyReporter); ok {
			<-r.ready
		}
	}
	return n
}

// C returns the channel on which notices arrive, in the order each source
// sent them. It is buffered (see [Config.Buffer]); when it is full, sources
// wait rather than lose a notice. C is closed after [Notifier.Stop]; notices
// already in its buffer can still be received.
func (n *Notifier) C() <-chan Notice { return n.c }

// Stop cancels every source and returns once all of them have returned and
// the Notifier's goroutines have ended. After Stop returns no notice is sent
// on C, and C is closed. Stop does not wait for the consumer of C: a notice
// that a source handed over while nobody was reading is put in C's buffer
// if there is room, and otherwise dropped (and logged), since the consumer
// asked to stop.
//
// Stop is idempotent and safe to call from several goroutines; every call
// returns only after the first one has finished. It waits for sources as
// long as they take, so it is as prompt as their Watch methods are (see
// [Source]).
func (n *Notifier) Stop() {
	n.stop.Do(func() {
		n.mu.Lock()
		n.stopped = true
		n.mu.Unlock()
		n.cancel()
		n.wg.Wait()
		close(n.c)
	})
}

// Status returns the state of every source, in the order they were given
// to New.
func (n *Notifier) Status() []SourceStatus {
	st := make([]SourceStatus, len(n.runs))
	for i, r := range n.runs {
		r.mu.Lock()
		st[i] = SourceStatus{
			Name:     r.name,
			State:    r.state,
			Err:      r.err,
			Reported: r.reported,
			Notices:  r.notices,
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
	// StateFailed: Watch returned another error before Stop.
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
	// Err is the error Watch returned, or, while it runs, the last error it
	// reported with ReportError (nil once it reported success again).
	Err error
	// Reported is when the source last sent a notice or reported its
	// health with ReportError. The zero time means never.
	Reported time.Time
	// Notices counts the notices of this source that were put on C.
	Notices int
}

// ReportError tells the Notifier that runs the source watching under ctx how
// that source is doing: err is a transient failure that the source is
// retrying, such as an unreachable metadata service; nil means it works
// again. It shows in [Notifier.Status], and the Notifier logs each change
// (not each call), so a source may call it on every poll.
//
// Outside a Notifier's Watch context ReportError does nothing.
func ReportError(ctx context.Context, err error) {
	if r, ok := ctx.Value(runKey{}).(*run); ok {
		r.report(err)
	}
}

// Ready tells the Notifier that runs the source watching under ctx that
// the source has set up what it watches with (installed its signal
// handler, opened its subscription): from now on no event is missed.
// [Config.New] waits for it from each [ReadyReporter]. Calling it more
// than once, or outside a Notifier's Watch context, does nothing.
func Ready(ctx context.Context) {
	if r, ok := ctx.Value(runKey{}).(*run); ok {
		r.readyOnce.Do(func() { close(r.ready) })
	}
}

// A ReadyReporter is a [Source] whose setup is quick and local (no
// network) and whose Watch calls [Ready] once it is done. [Config.New]
// does not return until each ReadyReporter has called Ready or returned
// from Watch, so that an event right after New, such as systemd's SIGTERM
// a moment after start, is not missed. ReportsReady is a marker: it does
// nothing.
type ReadyReporter interface {
	Source
	ReportsReady()
}

type runKey struct{}

// A run is one source inside a Notifier.
type run struct {
	n    *Notifier
	src  Source
	name string

	ready     chan struct{} // closed by Ready, or when Watch returns
	readyOnce sync.Once

	mu       sync.Mutex
	state    State
	err      error
	reported time.Time
	notices  int
}

// watch runs the source's Watch and records how it ended. in is the
// channel the source sends on; done is closed when Watch has returned, so
// that forward ends (in itself is never closed: a source that broke its
// contract and sent after returning would otherwise panic).
func (r *run) watch(ctx context.Context, in chan Notice, done chan struct{}) {
	defer r.n.wg.Done()
	defer close(done)
	r.n.log.Debug("termsig: source started", "source", r.name)
	err := r.src.Watch(context.WithValue(ctx, runKey{}, r), in)
	r.readyOnce.Do(func() { close(r.ready) })
	r.finish(ctx, err)
}

// forward moves notices from the source to C. A source waits in its send
// until the notice is taken, and forward waits until C has room, so a slow
// consumer holds back every source without a notice being dropped.
func (r *run) forward(ctx context.Context, in <-chan Notice, done <-chan struct{}) {
	defer r.n.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case nt := <-in:
			if nt.Source == "" {
				nt.Source = r.name
			}
			if nt.Observed.IsZero() {
				nt.Observed = time.Now()
			}
			select {
			case r.n.c <- nt:
				r.delivered(nt)
			case <-ctx.Done():
				select {
				case r.n.c <- nt:
					r.delivered(nt)
				default:
					r.n.log.Warn("termsig: notice dropped at Stop: nobody was reading", "source", r.name, "notice", nt.String())
				}
				return
			}
		}
	}
}

func (r *run) delivered(nt Notice) {
	r.mu.Lock()
	r.notices++
	r.reported = time.Now()
	r.mu.Unlock()
	// Enabled first: building the line costs more than delivering the notice.
	if r.n.log.Enabled(context.Background(), slog.LevelDebug) {
		r.n.log.Debug("termsig: notice", "source", r.name, "kind", nt.Kind.String(), "notice", nt.String())
	}
}

func (r *run) report(err error) {
	r.mu.Lock()
	prev := r.err
	changed := (prev == nil) != (err == nil) || (err != nil && prev.Error() != err.Error())
	if r.state == StateRunning {
		r.err = err
	}
	r.reported = time.Now()
	r.mu.Unlock()
	switch {
	case !changed:
	case err != nil:
		r.n.log.Warn("termsig: source error, retrying", "source", r.name, "err", err)
	default:
		r.n.log.Info("termsig: source recovered", "source", r.name, "after", prev)
	}
}

func (r *run) finish(ctx context.Context, err error) {
	var st State
	switch {
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
	// Status saying the same.
	r.mu.Lock()
	r.state, r.err = st, err
	r.mu.Unlock()
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

	r.n.mu.Lock()
	r.n.live--
	alone := r.n.live == 0 && !r.n.stopped
	r.n.mu.Unlock()
	if alone {
		r.n.log.Warn("termsig: no source is watching any more")
	}
}

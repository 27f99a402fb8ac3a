package imds

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"sync"
	"time"

	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
	"github.com/termsig/termsig/internal/health"
)

// A cadence says how often a path is polled.
type cadence uint8

const (
	// urgent: Interval, fastInterval while advice holds.
	urgent cadence = iota
	// grouped: AdvisoryInterval until the path has answered 200, then
	// as urgent. The lifecycle state answers 404 on an instance in no
	// Auto Scaling group, which is most of them.
	grouped
	// advisory: AdvisoryInterval.
	advisory
	// scheduled: MaintenanceInterval.
	scheduled
)

// A poller is one path with what has been reported from it. Each runs in
// its own goroutine, so its state needs no lock.
type poller struct {
	path    string
	cadence cadence
	limit   time.Duration // the longest backoff
	// handle turns one answer into notices, and says whether the answer
	// holds advice (see fastInterval). found is false for 404.
	handle func(found bool, body []byte) (notices []termsig.Notice, advice bool, err error)
}

// A watcher is one run of Watch: one poller per path, and their health,
// part i being pollers[i].
type watcher struct {
	cfg     Config // with defaults
	client  *awsimds.Client
	r       *termsig.Run
	pollers []poller
	parts   *health.Parts
	advice  advice
	origin  time.Time // of the grid of polls (see next)
}

func newWatcher(cfg Config, client *awsimds.Client, r *termsig.Run) *watcher {
	w := &watcher{cfg: cfg, client: client, r: r, advice: advice{changed: make(chan struct{})}, origin: time.Now()}
	w.pollers = w.newPollers()
	w.parts = health.New(r, len(w.pollers))
	return w
}

func (w *watcher) newPollers() []poller {
	var ps []poller
	urgentLimit := min(w.cfg.MaxBackoff, 4*w.cfg.Interval)
	if w.cfg.Events&SpotInterruption != 0 {
		ps = append(ps, poller{pathInstanceAction, urgent, urgentLimit, newSpotHandler()})
	}
	if w.cfg.Events&LifecycleState != 0 {
		// A backoff waits at least its base, so the limit does not cut
		// the AdvisoryInterval of the path while it answers 404.
		ps = append(ps, poller{pathLifecycle, grouped, urgentLimit, newLifecycleHandler()})
	}
	if w.cfg.Events&RebalanceRecommendation != 0 {
		ps = append(ps, poller{pathRebalance, advisory, w.cfg.MaxBackoff, newRebalanceHandler()})
	}
	if w.cfg.Events&ScheduledMaintenance != 0 {
		ps = append(ps, poller{pathScheduled, scheduled, w.cfg.MaxBackoff, newScheduledHandler()})
	}
	return ps
}

// interval returns how long after the start of one poll of p the next
// starts, when advice holds or not and p has answered 200 or not.
func (w *watcher) interval(p poller, advised, found bool) time.Duration {
	switch {
	case p.cadence == advisory, p.cadence == grouped && !found:
		return w.cfg.AdvisoryInterval
	case p.cadence == scheduled:
		return w.cfg.maintenanceInterval
	case advised:
		return min(w.cfg.fastInterval, w.cfg.Interval)
	}
	return w.cfg.Interval
}

// run polls every path, each in its own goroutine so that a slow answer
// on one does not delay the others, until ctx is done.
func (w *watcher) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range w.pollers {
		wg.Go(func() { w.loop(ctx, i) })
	}
	wg.Wait()
}

// loop polls the path of pollers[i] until ctx is done. After each poll it
// records the path's health and its advice, hands the notices over and,
// after the first, records the path's first look: the Notifier is told
// that the source is ready once every path has had one. When advice starts
// or ends, the wait under way is measured again from the last poll's
// start, so that the urgent paths go fast at once.
//
// Polls are due at points of a grid that all paths share (see next), and
// the next one is set before the poll rather than after: an idle process
// pays for each wakeup, not for each request, and a timer that becomes
// the earliest one (the request's timeout would, were the next poll not
// set yet) costs the runtime a wakeup of its own.
func (w *watcher) loop(ctx context.Context, i int) {
	p := w.pollers[i]
	pl := plan{w: w, timer: time.NewTimer(0)}
	defer pl.timer.Stop()
	var (
		start          time.Time
		looked, found  bool
		failing        bool
		bo             = backoff.Backoff{Max: p.limit}
		advised, moved = w.watchAdvice(p)
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-moved:
			advised, moved = w.watchAdvice(p)
			if step := w.interval(p, advised, found); !failing && !start.IsZero() {
				pl.set(start, step, step)
			}
			continue
		case <-pl.timer.C:
		}
		start = time.Now()
		step := w.interval(p, advised, found)
		pl.set(start, step, step)
		res := w.poll(ctx, p)
		if ctx.Err() != nil {
			return // an error caused by Stop is no error
		}
		w.parts.Set(i, res.err)
		if res.err == nil {
			found = found || res.found
			w.advice.set(i, res.advice)
		}
		if !w.send(ctx, p.path, res.notices) {
			return
		}
		if !looked {
			w.parts.Looked(i)
			looked = true
		}
		step = w.interval(p, advised, found)
		wait := step
		if failing = res.err != nil; failing {
			// The backoff's step may come from a faster cadence (the
			// advice ended while the path failed): never poll a failing
			// path faster than its interval.
			bo.Base = step
			wait = max(step, bo.Next())
		} else {
			bo.Reset()
		}
		pl.set(start, step, wait)
	}
}

// A plan is when the next poll of a path is due, and its timer.
type plan struct {
	w     *watcher
	timer *time.Timer
	due   time.Time
}

// set plans the poll after the one that started at start (see
// watcher.next), unless it is planned already.
func (pl *plan) set(start time.Time, step, wait time.Duration) {
	if at := pl.w.next(start, step, wait); !at.Equal(pl.due) {
		pl.due = at
		// The timer may have fired during the poll: with the timers of
		// Go before 1.23 (GODEBUG asynctimerchan=1), that tick would
		// stay in the channel after a Reset.
		if !pl.timer.Stop() {
			select {
			case <-pl.timer.C:
			default:
			}
		}
		pl.timer.Reset(time.Until(at))
	}
}

// next returns when the poll after one that started at start is due: wait
// after the point of the grid of step step (the path's interval) at or
// before start, rounded up to the grid. The grids of all paths start when
// the watcher did, so that polls of every path at every interval (each a
// multiple of the others, at the defaults) fall on the same points and
// share wakeups: at the defaults the lifecycle state and rebalance
// recommendations are polled with every third spot poll, the scheduled
// events with every thirtieth. wait is at least step.
func (w *watcher) next(start time.Time, step, wait time.Duration) time.Time {
	// wait rounded up to the grid, and added as a time.Time does (which
	// does not overflow): intervals of a century or more overflowed.
	if r := wait % step; r != 0 {
		if wait > math.MaxInt64-(step-r) {
			wait = math.MaxInt64
		} else {
			wait += step - r
		}
	}
	return w.origin.Add(start.Sub(w.origin) / step * step).Add(wait)
}

// watchAdvice returns whether advice holds and, for a path whose interval
// follows it, a channel closed when that changes; nil for the others.
func (w *watcher) watchAdvice(p poller) (bool, <-chan struct{}) {
	held, changed := w.advice.state()
	if p.cadence != urgent && p.cadence != grouped {
		changed = nil
	}
	return held, changed
}

// advice is whether any path's last answer holds advice: while one does,
// the urgent paths are polled at fastInterval.
type advice struct {
	mu      sync.Mutex
	holders uint64        // bit i: pollers[i]
	changed chan struct{} // closed, and replaced, when held changes
}

// set records whether pollers[i]'s last answer holds advice.
func (a *advice) set(i int, on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	was := a.holders != 0
	if on {
		a.holders |= 1 << i
	} else {
		a.holders &^= 1 << i
	}
	if (a.holders != 0) != was {
		close(a.changed)
		a.changed = make(chan struct{})
	}
}

// state returns whether advice holds, and a channel closed when that
// changes.
func (a *advice) state() (held bool, changed <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.holders != 0, a.changed
}

// send puts notices on Notifier.C, and reports false if ctx ended first.
func (w *watcher) send(ctx context.Context, path string, notices []termsig.Notice) bool {
	for _, n := range notices {
		w.cfg.Logger.Debug("imds: notice", "path", path, "notice", n)
		if w.r.Send(ctx, n) != nil {
			return false
		}
	}
	return true
}

// result is what one poll of one path gave.
type result struct {
	found   bool // 200, not 404
	advice  bool
	notices []termsig.Notice
	err     error
}

// poll fetches p's path once and hands the answer to p.handle.
func (w *watcher) poll(ctx context.Context, p poller) result {
	found, body, err := w.get(ctx, p.path)
	if err != nil {
		return result{err: err}
	}
	notices, advice, err := p.handle(found, body)
	if err != nil {
		return result{err: &pathError{path: p.path, msg: p.path + ": " + err.Error(), err: err}}
	}
	// Observed when the answer came, not when C had room.
	now := time.Now()
	for i := range notices {
		notices[i].Observed = now
	}
	return result{found: found, advice: advice, notices: notices}
}

// maxBody bounds what is read of one answer: real ones are a few hundred
// bytes.
const maxBody = 1 << 20

func (w *watcher) get(ctx context.Context, path string) (found bool, body []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	res, err := w.client.GetMetadata(ctx, &awsimds.GetMetadataInput{Path: path})
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
			return false, nil, nil
		}
		return false, nil, &pathError{path: path, msg: describe(err, w.cfg.RequestTimeout), err: err}
	}
	defer res.Content.Close()
	body, err = io.ReadAll(io.LimitReader(res.Content, maxBody+1))
	if err != nil {
		return false, nil, &pathError{path: path, msg: "reading the answer: " + describe(err, w.cfg.RequestTimeout), err: err}
	}
	if len(body) > maxBody {
		return false, nil, &pathError{path: path, msg: path + ": answer larger than 1 MiB", err: errBadPayload}
	}
	return true, body, nil
}

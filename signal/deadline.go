package signal

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
)

// A stopRule says which signal is followed by a kill, and how long after.
// The zero stopRule gives no deadline.
type stopRule struct {
	sig     os.Signal // nil: no signal has a deadline
	timeout time.Duration
}

// deadline returns the Deadline of a notice of sig observed at seen, or
// the zero time.
func (r stopRule) deadline(sig os.Signal, seen time.Time) time.Time {
	if r.sig == nil || sig != r.sig {
		return time.Time{}
	}
	return seen.Add(r.timeout)
}

// A deadlines is what one Watch knows of the deadlines of its signals:
// the rule from Config or the environment at once, or the one that the
// systemd lookup, running meanwhile, finds.
type deadlines struct {
	first chan struct{} // closed once the first answer is known
	once  sync.Once
	stop  context.CancelFunc
	wg    sync.WaitGroup

	mu   sync.Mutex
	rule stopRule
}

// startDeadlines works out the rule for c (which has its defaults), and
// starts the systemd lookup when neither Config nor the environment says.
// It never blocks on the lookup: call close when Watch returns.
func startDeadlines(ctx context.Context, c Config, r *termsig.Run) *deadlines {
	d := &deadlines{first: make(chan struct{}), stop: func() {}}
	switch {
	case c.StopTimeout < 0:
		d.known()
		return d
	case c.StopTimeout > 0:
		d.set(stopRule{sig: syscall.SIGTERM, timeout: c.StopTimeout})
		return d
	}
	if v, ok := os.LookupEnv(StopTimeoutEnv); ok && v != "" {
		t, err := parseStopTimeout(v)
		if err != nil {
			c.Logger.Warn("signal: no SIGTERM deadline", "err", err)
		} else {
			d.set(stopRule{sig: syscall.SIGTERM, timeout: t})
		}
		d.known()
		return d
	}
	invocation := os.Getenv(invocationEnv)
	ctx, d.stop = context.WithCancel(ctx)
	d.wg.Go(func() { d.lookup(ctx, c, r, invocation) })
	return d
}

// lookup asks systemd until it has an answer. When systemd started this
// process (invocation is its INVOCATION_ID) a failure is logged, and one
// that may pass (the bus or systemd slow, gone, restarting) is reported
// and retried with backoff; otherwise one attempt is made, quietly: the
// process may well not be a service.
func (d *deadlines) lookup(ctx context.Context, c Config, r *termsig.Run, invocation string) {
	bo := backoff.Backoff{Base: c.retry, Max: c.maxRetry, Jitter: true}
	reported := false
	sawBus := false // a bus was there: one missing now is restarting
	for {
		u, err := lookupUnit(ctx, c, invocation)
		if ctx.Err() != nil {
			d.known()
			return
		}
		if err == nil {
			d.set(u.rule)
			u.log(c.Logger)
			if reported {
				r.Report(nil)
			}
			return
		}
		d.known()
		var perm *permanentError
		noBus := errors.Is(err, errNoBus)
		switch {
		case invocation == "":
			return
		case errors.As(err, &perm) && !(noBus && sawBus):
			c.Logger.Warn("signal: no deadline from systemd", "err", err)
			if reported {
				r.Report(nil)
			}
			return
		}
		sawBus = sawBus || !noBus
		r.Report(err)
		reported = true
		if !backoff.Sleep(ctx, bo.Next()) {
			return
		}
	}
}

// set makes r the rule, and the answer known.
func (d *deadlines) set(r stopRule) {
	d.mu.Lock()
	d.rule = r
	d.mu.Unlock()
	d.known()
}

// known says that the first answer is in, whatever it is.
func (d *deadlines) known() { d.once.Do(func() { close(d.first) }) }

// get returns the rule, once the first answer is known or ctx is done.
func (d *deadlines) get(ctx context.Context) stopRule {
	select {
	case <-d.first:
	case <-ctx.Done():
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rule
}

// close ends the lookup and waits for it.
func (d *deadlines) close() {
	d.stop()
	d.wg.Wait()
}

// A unit is what the lookup learnt: the rule, and what to log about it.
type unit struct {
	name string
	rule stopRule
	why  string // why there is no deadline, when rule has none
}

func (u unit) log(l *slog.Logger) {
	if u.rule.sig == nil {
		l.Info("signal: no deadline from systemd", "unit", u.name, "why", u.why)
		return
	}
	l.Info("signal: deadline from systemd", "unit", u.name,
		"signal", termsig.SignalName(u.rule.sig), "timeout", u.rule.timeout)
}

// errNoBus is the lookup's failure where no socket of the bus exists:
// there is no bus here, unless one was there before.
var errNoBus = errors.New("signal: no system bus")

// A permanentError is a lookup failure that asking again would not
// change: the process is not in a service of the system manager, or may
// not ask.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

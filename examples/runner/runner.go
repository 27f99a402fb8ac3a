//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
)

// Exit statuses. systemd counts 0 as a clean stop whatever the cause, so a
// runner that drained and unregistered exits 0 after a platform notice,
// SIGTERM or SIGINT alike (never 143), and Restart=on-failure leaves it
// stopped; every failure is non-zero, so systemd records it and restarts.
const (
	exitClean      = 0 // drained, job re-queued, unregistered
	exitStartup    = 1 // could not register within -register-timeout (at start, or again after losing the registration)
	exitUsage      = 2 // bad flags
	exitUnregister = 3 // drained, but could not unregister before the deadline
	exitReexec     = 4 // SIGHUP: the job finished, but re-executing failed
)

type config struct {
	name            string
	labels          []string
	poll            time.Duration // how often to ask for a job when idle
	grace           time.Duration // longest wait for a job after SIGTERM
	margin          time.Duration // kept before the deadline for re-queueing and unregistering
	stopTimeout     time.Duration // the deadline of a notice that has none, and the furthest one
	maxHold         time.Duration // the longest a held termination lets the job finish
	registerTimeout time.Duration
	onAdvice        string   // "drain" or "ignore"
	resumeID        string   // the registration to keep, after a re-exec
	service         string   // the CI service's URL, recorded in the state file
	statePath       string   // the state file; "" for none
	jobEnv          []string // the runner's environment variables that jobs get
	jobUser         *jobUser // the user jobs run as; nil: the runner's
	joinToken       secret   // what registering takes; "": nothing
}

// A runner is one registration with the CI service and the job it runs.
// Its methods are called from one goroutine: the loop in run. They are
// spread over files by what they do: registering (register.go), claiming
// jobs and reporting them (claim.go), draining on an imminent notice
// (drain.go), re-executing on SIGHUP (reload.go) and keeping what must
// outlive the process (statefile.go).
type runner struct {
	cfg     config
	svc     CIService
	tl      *timeline
	notices <-chan termsig.Notice
	stop    func() // stops the sources
	// release tells the notices' sources that the runner is done with
	// them (termsig.Notifier.Release): logind's delay lock then lets the
	// shutdown go on at once. Nil: nothing to tell.
	release func(context.Context, termsig.Notice) error
	notify  func(state string) // sd_notify
	// ready is closed once every source has had its first look at the
	// host (termsig.Notifier.Ready): the runner claims no job before, for
	// at most settleFor. Nil: do not wait.
	ready <-chan struct{}
	// ops counts the notices and what the runner did about them, posts
	// them to the webhook, and watches the loop for /healthz; m are the
	// runner's own metrics. Nil: none.
	ops *ops.Server
	m   *runnerMetrics

	settled bool // no longer waiting for ready (see settle)
	// registered says the runner holds a live registration, for /readyz,
	// which reads it from its own goroutine.
	registered atomic.Bool

	reg     Registration              // "" ID: none; before register returns, an earlier run's
	job     *process                  // the job running, if any
	pending *pendingReport            // a result the CI service has not taken yet
	paused  map[advice]termsig.Notice // advice in force, by (source, event)
	reload  bool                      // SIGHUP: finish the job, then re-exec
	lost    bool                      // the CI service no longer knows the registration
	urgent  *termsig.Notice           // an imminent notice taken while busy: drain at once
	holding *hold                     // a held termination: let the job finish, then leave
	drained []termsig.Notice          // the imminent notices the drain is for, to release
	leaving *termsig.Notice           // the notice leave goes by, for the webhook's outcomes
	errs    map[string]string         // the last error of each kind of request, for warn
}

// run registers, runs jobs until an imminent notice, and returns the exit
// status. It returns only for exits; a reload re-executes the binary.
func (r *runner) run() int {
	r.paused = map[advice]termsig.Notice{}
	r.errs = map[string]string{}
	if groups := killLeftovers(r.cfg.name); len(groups) > 0 {
		r.tl.Printf("killed the processes of jobs left running by an earlier runner named %q (process groups %v)", r.cfg.name, groups)
	}
	r.load()
	if code, ok := r.register(); !ok {
		return code
	}
	r.notify("READY=1")
	r.tl.Printf("ready: runner %s (%s), asking for a job every %v", r.reg.ID, r.cfg.name, r.cfg.poll)
	return r.loop()
}

// loop waits for whatever comes first: the sources' first look, a notice,
// the poll timer, the heartbeat timer, the job's end, the end of a hold.
// It returns the exit status after a drain, or re-executes the runner for
// a reload.
func (r *runner) loop() int {
	poll := time.NewTimer(0)
	defer poll.Stop()
	settle := time.NewTimer(settleFor)
	defer settle.Stop()
	beat := time.NewTimer(time.Hour)
	defer beat.Stop()
	holdEnd := time.NewTimer(time.Hour)
	defer holdEnd.Stop()
	lastBeat := time.Now()
	for {
		r.ops.Tick()
		if code, done := r.between(); done {
			return code
		}
		// The poll timer delivers a result the CI service has not taken
		// yet, and claims a job when mayClaim allows. When it has neither
		// to do it is not waited for; what changes that (the job's end,
		// a notice, the sources' first look) resets it.
		var pollC <-chan time.Time
		if r.pending != nil || r.mayClaim() {
			pollC = poll.C
		}
		var doneC <-chan Result
		if r.job != nil {
			doneC = r.job.done
		}
		var readyC <-chan struct{}
		var settleC <-chan time.Time
		if !r.settled {
			readyC, settleC = r.ready, settle.C
		}
		// Counted from the last heartbeat, not from this pass: a stream
		// of notices must not put the heartbeat off for ever.
		var beatC <-chan time.Time
		if every := r.beatEvery(); every > 0 {
			beat.Reset(time.Until(lastBeat.Add(every)))
			beatC = beat.C
		}
		var holdC <-chan time.Time
		if h := r.holding; h != nil {
			holdEnd.Reset(time.Until(h.end))
			holdC = holdEnd.C
		}
		select {
		case <-r.ops.Heartbeat():
			// Only for /healthz: the loop turns, and Ticks.
		case <-readyC:
			// What the sources saw in their first look is on C by now:
			// a host already under notice must not take a job.
			r.settle(true)
			r.checkNotices()
			poll.Reset(0)
		case <-settleC:
			r.settle(false)
			poll.Reset(0)
		case nt := <-r.notices:
			r.notice(nt)
			poll.Reset(0)
		case <-pollC:
			r.pollOnce()
			poll.Reset(r.cfg.poll)
		case <-beatC:
			lastBeat = time.Now()
			r.heartbeat()
		case res := <-doneC:
			r.finished(res)
			poll.Reset(0)
		case <-holdC:
			r.holding.over = true
		}
	}
}

// between does what comes before each wait: drain after an imminent
// notice, register again if the registration is gone, leave once a hold
// has no job left to wait for or its end has come, re-execute for a
// reload once idle. It reports whether the runner is done, and its exit
// status.
func (r *runner) between() (code int, done bool) {
	if r.urgent != nil {
		return r.drain(*r.urgent), true
	}
	if r.lost {
		if code, ok := r.reRegister(); !ok {
			return code, true
		}
	}
	if h := r.holding; h != nil && (h.over || r.job == nil) {
		return r.endHold(), true
	}
	// A reload waits for the job and for its result to be reported: the
	// new image knows nothing of either.
	if r.reload && r.idle() {
		return r.restart(), true
	}
	return 0, false
}

// beatEvery is how often to send a heartbeat: a third of the lease, so
// that two lost ones do not cost the registration. Zero: never.
func (r *runner) beatEvery() time.Duration { return r.reg.Lease / 3 }

// callTimeout bounds one request to the CI service outside a drain.
const callTimeout = 5 * time.Second

// errLeaving is what call returns for a request that an imminent notice
// cut short.
var errLeaving = errors.New("interrupted by an imminent notice")

// call runs one request to the CI service, bounded by callTimeout, and
// handles the notices that come meanwhile, so that a slow or hung CI
// service never delays a drain: an imminent notice cancels the request
// and is kept in r.urgent, for the loop to drain at once. The request's
// own answer is still returned if it came (a claimed job must be handed
// back); otherwise the error wraps errLeaving. Once r.urgent is set, call
// makes no request.
func (r *runner) call(op func(context.Context) error) error {
	if r.urgent != nil {
		return errLeaving
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	for {
		select {
		case err := <-done:
			return err
		case nt := <-r.notices:
			if r.notice(nt); r.urgent == nil {
				continue
			}
			cancel()
			if err := <-done; err != nil {
				return fmt.Errorf("%w (%w)", errLeaving, err)
			}
			return nil
		}
	}
}

// warn logs err for what once per change, so that a CI service that is down
// does not fill the log with one line per poll. A request cut short by a
// notice is not worth a line.
func (r *runner) warn(what string, err error) {
	if errors.Is(err, errLeaving) {
		return
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if r.errs[what] == msg {
		return
	}
	r.errs[what] = msg
	if err != nil {
		r.tl.Printf("%s failed: %v (retrying)", what, err)
	} else {
		r.tl.Printf("%s works again", what)
	}
}

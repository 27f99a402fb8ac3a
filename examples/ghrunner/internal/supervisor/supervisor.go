//go:build unix

package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghapi"
	"github.com/termsig/termsig/examples/ghrunner/internal/runner"
)

// Exit statuses of Run.
const (
	ExitOK       = 0
	ExitFailed   = 1 // could not set up the runner, or run.sh ended by itself
	ExitDeadline = 3 // the deadline came before the cleanup was done
)

// Config is what Run needs. Every field is required, but Logger and Ops.
type Config struct {
	Dir    *runner.Dir    // the runner's directory, user and output; Run counts its jobs (Dir.OnJob, on a copy)
	Runner runner.Options // config.sh's options: its URL, name, labels, ephemeral
	API    *ghapi.Client  // the runner's repository or organisation
	Logger *slog.Logger   // nil: no log
	// Ops counts the notices and what Run does about them (on its
	// Registerer, ghrunner's own metrics), posts them to its webhook, and
	// serves /healthz (Run's loop turns) and /readyz (the runner is
	// registered). Nil: none of it.
	Ops *ops.Server

	// Margin is kept before a notice's deadline: the cleanup ends this
	// much earlier.
	Margin time.Duration
	// StopTimeout is the deadline of a notice that has none (SIGTERM), the
	// furthest one taken from a notice, and how long a restart waits for
	// run.sh to stop before SIGKILL.
	StopTimeout time.Duration
	// Poll is how often the API is asked whether a cancelled run has
	// completed.
	Poll time.Duration
	// SetupTimeout bounds the start: removing a stale registration,
	// config.sh.
	SetupTimeout time.Duration
	// RerunAll re-runs all the jobs of an interrupted run, not only its
	// failed and cancelled ones.
	RerunAll bool
	// MaxAttempts: a run that has had this many attempts is not re-run.
	MaxAttempts int64
	// MaxHold is how long a held termination (an Auto Scaling
	// termination hook's) lets run.sh's job finish, from its first
	// notice, before the job is handed back as after a hard notice; zero
	// hands it back at once. The hold's own end comes first when it is
	// nearer (see hold.at).
	MaxHold time.Duration
}

// Run registers the runner, supervises run.sh and cleans up after an
// imminent notice from n: it cancels the interrupted job's run, stops
// run.sh, re-runs the run and removes the registration, before the
// notice's deadline. After a held notice ([termsig.Notice.Held]) it lets
// the job run.sh runs finish first, within the hold and MaxHold. A Reload
// notice restarts run.sh once its job has ended. Run returns when run.sh
// has ended or the cleanup is done, with the process's exit status; it
// releases the notices it acted on.
func Run(cfg Config, n *termsig.Notifier) int {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &supervisor{cfg: cfg, log: cfg.Logger, api: cfg.API, notices: n.C(), release: n.Release,
		ops: cfg.Ops, m: newMetrics(cfg.Ops.Registerer())}
	dir := *cfg.Dir
	dir.OnJob = s.m.job
	s.cfg.Dir = &dir
	cfg.Ops.Watch(n)
	cfg.Ops.AddReadyCheck("registration", s.registrationReady)
	return s.run()
}

// A supervisor is the state of one run of the program.
type supervisor struct {
	cfg     Config
	log     *slog.Logger
	api     *ghapi.Client
	notices <-chan termsig.Notice
	release func(context.Context, termsig.Notice) error
	ops     *ops.Server // nil: none
	m       *metrics    // nil: none

	reg   *runner.Registration // this run's registration, once config.sh has made it
	child *runner.Process      // run.sh, once started
	// registered says reg is live and run.sh runs, for /readyz, which
	// reads it from its own goroutine.
	registered atomic.Bool

	reloading  bool        // a Reload waits for the current job to end
	restarting bool        // run.sh was interrupted to be started again
	reloadKill *time.Timer // SIGKILL for a run.sh that does not stop for a restart
	hold       *hold       // a held termination waiting for run.sh's job
	holdTimer  *time.Timer // fires at the hold's cleanup time
	drain      *drain      // the cleanup, once an imminent notice came

	known     knownJob        // the job run.sh runs, looked up when it started
	lookedUp  *runner.Process // the run.sh and its job count last looked up
	lookedUpN int
}

var errSetupTimeout = errors.New("-setup-timeout passed")

// run sets the runner up, supervises run.sh and cleans up after a notice;
// it returns the exit status.
func (s *supervisor) run() int {
	nt, err := s.setUp()
	switch {
	case nt != nil:
		s.log.Warn("ghrunner: imminent notice while starting: cleaning up", "notice", *nt)
		s.startDrain(*nt)
		return s.awaitDrain()
	case err != nil:
		s.log.Error("ghrunner: cannot start the runner", "err", err)
		return ExitFailed
	}
	s.registered.Store(true)
	s.reloadKill = stoppedTimer()
	defer s.reloadKill.Stop()
	s.holdTimer = stoppedTimer()
	defer s.holdTimer.Stop()
	lookups, stopLookups := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopLookups()
	for {
		s.ops.Tick()
		select {
		case <-s.ops.Heartbeat():
		case nt, ok := <-s.notices:
			if !ok {
				s.notices = nil
				continue
			}
			s.ops.Noticed(nt)
			if s.notice(nt); s.drain != nil {
				return s.awaitDrain() // the drain has run.sh now
			}
		case <-s.child.Changed():
			s.maybeRestart()
			s.lookUpJob(lookups, &wg)
			if busy, _, _ := s.child.State(); s.hold != nil && !busy {
				s.endHold(true)
				return s.awaitDrain()
			}
		case <-s.child.Done():
			if s.hold != nil {
				s.endHold(true)
				return s.awaitDrain()
			}
			if code, end := s.childExited(); end {
				return code
			}
		case <-s.holdTimer.C:
			s.endHold(false)
			return s.awaitDrain()
		case <-s.reloadKill.C:
			s.log.Warn("ghrunner: run.sh did not stop for the restart: SIGKILL to its process group", "pgid", s.child.Pid())
			s.child.Kill()
		}
	}
}

// awaitDrain waits for the cleanup's end, handing it later notices (an
// earlier deadline brings its end forward).
func (s *supervisor) awaitDrain() int {
	for {
		s.ops.Tick()
		select {
		case <-s.ops.Heartbeat():
		case nt, ok := <-s.notices:
			if !ok {
				s.notices = nil
				continue
			}
			s.ops.Noticed(nt)
			s.notice(nt)
		case code := <-s.drain.done:
			return code
		}
	}
}

// setUp runs the start: a stale registration of the same name removed
// (and its lost job re-run), a new one made with config.sh, run.sh
// started. An imminent notice during it ends it and is returned.
func (s *supervisor) setUp() (*termsig.Notice, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, s.cfg.SetupTimeout, errSetupTimeout)
	defer stop()
	early := make(chan termsig.Notice, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watchDuringSetUp(ctx, early, cancel)
	}()
	err := s.prepare(ctx)
	cancel(nil)
	<-watched
	select {
	case nt := <-early:
		return &nt, nil
	default:
	}
	if err != nil {
		return nil, err
	}
	if s.child, err = s.cfg.Dir.Start(); err != nil {
		return nil, err
	}
	s.log.Info("ghrunner: run.sh started", "pid", s.child.Pid(), "runner_id", s.reg.ID)
	return nil, nil
}

// watchDuringSetUp waits for an imminent notice while the runner is set
// up, and cancels the set-up when one comes. Other notices are logged:
// a Reload has nothing to restart yet.
func (s *supervisor) watchDuringSetUp(ctx context.Context, early chan<- termsig.Notice, cancel context.CancelCauseFunc) {
	for {
		s.ops.Tick() // the set-up's loop is this one
		select {
		case <-s.ops.Heartbeat():
		case nt, ok := <-s.notices:
			if !ok {
				s.notices = nil
				return
			}
			s.ops.Noticed(nt)
			if nt.Kind.Imminent() {
				early <- nt
				cancel(fmt.Errorf("notice: %v", nt))
				return
			}
			s.log.Info("ghrunner: notice while starting; nothing to do", "notice", nt)
		case <-ctx.Done():
			return
		}
	}
}

// prepare removes stale registrations and registers the runner.
func (s *supervisor) prepare(ctx context.Context) error {
	local, err := s.cfg.Dir.Registration()
	if err != nil {
		s.log.Warn("ghrunner: the runner directory's registration is unreadable; making a new one", "err", err)
		local = nil
	}
	if err := s.removeStale(ctx, local); err != nil {
		return err
	}
	if err := s.cfg.Dir.Clear(); err != nil {
		return fmt.Errorf("remove the old registration's files: %w", err)
	}
	token, err := s.api.RegistrationToken(ctx)
	if err != nil {
		return err
	}
	o := s.cfg.Runner
	s.log.Info("ghrunner: configuring the runner", "url", o.URL, "name", o.Name, "labels", o.Labels, "ephemeral", o.Ephemeral)
	if s.reg, err = s.cfg.Dir.Configure(ctx, token, o); err != nil {
		// config.sh may have registered the runner before it failed or
		// was stopped by a notice: the cleanup must remove that.
		if reg, _ := s.cfg.Dir.Registration(); reg != nil {
			s.reg = reg
		}
		return err
	}
	s.log.Info("ghrunner: registered", "runner_id", s.reg.ID, "name", s.cfg.Runner.Name)
	return nil
}

// notice acts on a notice while run.sh runs. A held notice (see held)
// lets run.sh's job finish first; any other imminent notice is hard, and
// cleans up at once, also during a hold (a spot interruption, SIGTERM, or
// the hold's own end: a later notice of a held event that is not held).
func (s *supervisor) notice(nt termsig.Notice) {
	switch {
	case nt.Kind.Imminent() && s.drain != nil:
		s.drain.tighten(nt)
	case nt.Kind.Imminent() && nt.Held && !nt.Deadline.IsZero():
		s.held(nt)
	case nt.Kind.Imminent() && s.hold != nil && s.hold.has(nt):
		s.log.Warn("ghrunner: the hold is over: cleaning up by its deadline", "notice", nt)
		s.startDrain(nt)
	case nt.Kind.Imminent() && s.hold != nil:
		s.log.Warn("ghrunner: a hard notice during the hold: cleaning up at once", "notice", nt)
		s.startDrain(nt)
	case nt.Kind.Imminent():
		s.log.Warn("ghrunner: imminent notice: cleaning up", "notice", nt)
		s.startDrain(nt)
	case nt.Kind == termsig.Reload && s.drain == nil && s.hold == nil:
		s.requestReload(nt)
	default:
		s.log.Info("ghrunner: notice; nothing to do", "notice", nt)
	}
}

// requestReload handles SIGHUP, "finish, then restart": run.sh is
// restarted once its current job has ended, keeping the registration.
func (s *supervisor) requestReload(nt termsig.Notice) {
	if s.reloading || s.restarting {
		s.log.Info("ghrunner: a restart of run.sh is already under way", "notice", nt)
		return
	}
	if s.cfg.Runner.Ephemeral {
		// Its run.sh ends after its one job anyway; started again, it would
		// find its registration gone.
		s.log.Info("ghrunner: reload: an ephemeral runner is not restarted", "notice", nt)
		return
	}
	s.reloading = true
	if busy, job, _ := s.child.State(); busy {
		s.log.Info("ghrunner: reload: restarting run.sh once its job ends", "job", job, "notice", nt)
		return
	}
	s.maybeRestart()
}

// maybeRestart restarts run.sh for a pending reload once it runs no job.
func (s *supervisor) maybeRestart() {
	if !s.reloading {
		return
	}
	if busy, _, _ := s.child.State(); busy {
		return
	}
	s.reloading, s.restarting = false, true
	s.log.Info("ghrunner: reload: stopping run.sh to start it again", "pid", s.child.Pid())
	if err := s.child.Interrupt(); err != nil {
		s.log.Warn("ghrunner: cannot interrupt run.sh", "err", err)
	}
	s.reloadKill.Reset(s.cfg.StopTimeout)
}

// childExited handles run.sh's exit outside a drain: after a restart's
// interrupt it is started again; otherwise ghrunner ends with its status.
func (s *supervisor) childExited() (int, bool) {
	if s.restarting {
		s.restarting = false
		s.reloadKill.Stop()
		s.log.Info("ghrunner: run.sh stopped for the restart", "status", s.child.Status())
		c, err := s.cfg.Dir.Start()
		if err == nil {
			s.child = c
			s.log.Info("ghrunner: run.sh started again; registration kept", "pid", c.Pid(), "runner_id", s.reg.ID)
			return 0, false
		}
		s.log.Error("ghrunner: cannot start run.sh again", "err", err)
		return ExitFailed, true
	}
	return s.ended(s.child.Status()), true
}

// ended handles run.sh ending by itself. The real run.sh exits 0 however
// its listener ended (a crash, its registration removed, a session
// conflict), so its status tells nothing: only an ephemeral runner's end
// after its one job is a clean one. Then the registration is removed (if
// GitHub has not done it already) and ghrunner exits 0. Any other end is a
// failure, exit 1, so that systemd starts ghrunner again; the
// registration is left to that start, which finds it offline, re-runs a
// job it lost, and removes it.
func (s *supervisor) ended(status int) int {
	if _, _, jobs := s.child.State(); !s.cfg.Runner.Ephemeral || jobs == 0 {
		s.log.Error("ghrunner: run.sh ended by itself; its registration is left for the next start to clean up", "status", status, "runner_id", s.reg.ID)
		return ExitFailed
	}
	s.log.Info("ghrunner: the ephemeral runner has run its job", "status", status)
	err := s.unregisterHeeding()
	s.m.unregistered(okOr(err))
	if err != nil {
		s.log.Error("ghrunner: cannot remove the registration", "runner_id", s.reg.ID, "err", err)
		return ExitFailed
	}
	s.log.Info("ghrunner: registration removed", "runner_id", s.reg.ID)
	return ExitOK
}

// unregisterHeeding removes the registration within -stop-timeout, or by
// the end of an imminent notice that comes meanwhile.
func (s *supervisor) unregisterHeeding() error {
	end := time.Now().Add(s.cfg.StopTimeout)
	var seen []termsig.Notice
	defer func() { (&drain{s: s, release: seen}).releaseAll() }()
	for {
		// Each try's context keeps its deadline: a notice that brings the
		// end forward ends the try, and the next one has the new end.
		ctx, cancel := context.WithDeadlineCause(context.Background(), end, errDeadline)
		done := make(chan error, 1)
		go func() { done <- s.unregister(ctx) }()
		moved, err := s.awaitUnregister(done, &seen, &end)
		if moved {
			cancel()
			<-done
			continue
		}
		cancel()
		return err
	}
}

// awaitUnregister waits for the removal's result on done, noting the
// imminent notices that come meanwhile in seen. moved says one brought
// end forward: the try under way is to end, and another to start.
func (s *supervisor) awaitUnregister(done <-chan error, seen *[]termsig.Notice, end *time.Time) (moved bool, err error) {
	for {
		s.ops.Tick()
		select {
		case <-s.ops.Heartbeat():
		case err := <-done:
			return false, err
		case nt, ok := <-s.notices:
			if !ok {
				s.notices = nil
				continue
			}
			s.ops.Noticed(nt)
			if !nt.Kind.Imminent() {
				continue
			}
			s.log.Warn("ghrunner: imminent notice while removing the registration", "notice", nt)
			*seen = append(*seen, nt)
			if e := s.endOf(nt); e.Before(*end) {
				s.ops.Acted(nt) // the removal starts again by the earlier end
				*end = e
				return true, nil
			}
		}
	}
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

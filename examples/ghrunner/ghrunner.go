//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/termsig/termsig"
)

// A ghrunner is the state of one run of the program.
type ghrunner struct {
	o       *options
	log     *slog.Logger
	api     *api
	out     io.Writer // where config.sh's and run.sh's output goes
	notices <-chan termsig.Notice
	release func(context.Context, termsig.Notice) error

	reg   *registration // this run's registration, once config.sh has made it
	child *child        // run.sh, once started

	reloading  bool        // a Reload waits for the current job to end
	restarting bool        // run.sh was interrupted to be started again
	reloadKill *time.Timer // SIGKILL for a run.sh that does not stop for a restart
	drain      *drain      // the cleanup, once an imminent notice came

	known     knownJob // the job run.sh runs, looked up when it started
	lookedUp  *child   // the run.sh and its job count last looked up
	lookedUpN int
}

var errSetupTimeout = errors.New("-setup-timeout passed")

// run sets the runner up, supervises run.sh and cleans up after a notice;
// it returns the exit status.
func (g *ghrunner) run() int {
	nt, err := g.setUp()
	switch {
	case nt != nil:
		g.log.Warn("ghrunner: imminent notice while starting: cleaning up", "notice", *nt)
		g.startDrain(*nt)
		return g.awaitDrain()
	case err != nil:
		g.log.Error("ghrunner: cannot start the runner", "err", err)
		return exitFailed
	}
	g.reloadKill = stoppedTimer()
	defer g.reloadKill.Stop()
	lookups, stopLookups := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopLookups()
	for {
		select {
		case nt, ok := <-g.notices:
			if !ok {
				g.notices = nil
				continue
			}
			if g.notice(nt); g.drain != nil {
				return g.awaitDrain() // the drain has run.sh now
			}
		case <-g.child.changed:
			g.maybeRestart()
			g.lookUpJob(lookups, &wg)
		case <-g.child.done:
			if code, end := g.childExited(); end {
				return code
			}
		case <-g.reloadKill.C:
			g.log.Warn("ghrunner: run.sh did not stop for the restart: SIGKILL to its process group", "pgid", g.child.pid)
			g.child.kill()
		}
	}
}

// awaitDrain waits for the cleanup's end, handing it later notices (an
// earlier deadline brings its end forward).
func (g *ghrunner) awaitDrain() int {
	for {
		select {
		case nt, ok := <-g.notices:
			if !ok {
				g.notices = nil
				continue
			}
			g.notice(nt)
		case code := <-g.drain.done:
			return code
		}
	}
}

// setUp runs the start: a stale registration of the same name removed
// (and its lost job re-run), a new one made with config.sh, run.sh
// started. An imminent notice during it ends it and is returned.
func (g *ghrunner) setUp() (*termsig.Notice, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, g.o.setupTime, errSetupTimeout)
	defer stop()
	early := make(chan termsig.Notice, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		g.watchDuringSetUp(ctx, early, cancel)
	}()
	err := g.prepare(ctx)
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
	if g.child, err = startRunSh(g.o.runnerDir, g.o.runAs, g.out); err != nil {
		return nil, err
	}
	g.log.Info("ghrunner: run.sh started", "pid", g.child.pid, "runner_id", g.reg.ID)
	return nil, nil
}

// watchDuringSetUp waits for an imminent notice while the runner is set
// up, and cancels the set-up when one comes. Other notices are logged:
// a Reload has nothing to restart yet.
func (g *ghrunner) watchDuringSetUp(ctx context.Context, early chan<- termsig.Notice, cancel context.CancelCauseFunc) {
	for {
		select {
		case nt, ok := <-g.notices:
			if !ok {
				g.notices = nil
				return
			}
			if nt.Kind.Imminent() {
				early <- nt
				cancel(fmt.Errorf("notice: %v", nt))
				return
			}
			g.log.Info("ghrunner: notice while starting; nothing to do", "notice", nt)
		case <-ctx.Done():
			return
		}
	}
}

// prepare removes stale registrations and registers the runner.
func (g *ghrunner) prepare(ctx context.Context) error {
	local, err := readRegistration(g.o.runnerDir)
	if err != nil {
		g.log.Warn("ghrunner: the runner directory's registration is unreadable; making a new one", "err", err)
		local = nil
	}
	if err := g.removeStale(ctx, local); err != nil {
		return err
	}
	if err := clearConfig(g.o.runnerDir); err != nil {
		return fmt.Errorf("remove the old registration's files: %w", err)
	}
	token, err := g.api.registrationToken(ctx)
	if err != nil {
		return err
	}
	if g.reg, err = g.configure(ctx, token); err != nil {
		// config.sh may have registered the runner before it failed or
		// was stopped by a notice: the cleanup must remove that.
		if reg, _ := readRegistration(g.o.runnerDir); reg != nil {
			g.reg = reg
		}
		return err
	}
	g.log.Info("ghrunner: registered", "runner_id", g.reg.ID, "name", g.o.name)
	return nil
}

// notice acts on a notice while run.sh runs.
func (g *ghrunner) notice(nt termsig.Notice) {
	switch {
	case nt.Kind.Imminent() && g.drain == nil:
		g.log.Warn("ghrunner: imminent notice: cleaning up", "notice", nt)
		g.startDrain(nt)
	case nt.Kind.Imminent():
		g.drain.tighten(nt)
	case nt.Kind == termsig.Reload && g.drain == nil:
		g.requestReload(nt)
	default:
		g.log.Info("ghrunner: notice; nothing to do", "notice", nt)
	}
}

// requestReload handles SIGHUP, "finish, then restart": run.sh is
// restarted once its current job has ended, keeping the registration.
func (g *ghrunner) requestReload(nt termsig.Notice) {
	if g.reloading || g.restarting {
		g.log.Info("ghrunner: a restart of run.sh is already under way", "notice", nt)
		return
	}
	if g.o.ephemeral {
		// Its run.sh ends after its one job anyway; started again, it would
		// find its registration gone.
		g.log.Info("ghrunner: reload: an ephemeral runner is not restarted", "notice", nt)
		return
	}
	g.reloading = true
	if busy, job, _ := g.child.state(); busy {
		g.log.Info("ghrunner: reload: restarting run.sh once its job ends", "job", job, "notice", nt)
		return
	}
	g.maybeRestart()
}

// maybeRestart restarts run.sh for a pending reload once it runs no job.
func (g *ghrunner) maybeRestart() {
	if !g.reloading {
		return
	}
	if busy, _, _ := g.child.state(); busy {
		return
	}
	g.reloading, g.restarting = false, true
	g.log.Info("ghrunner: reload: stopping run.sh to start it again", "pid", g.child.pid)
	if err := g.child.interrupt(); err != nil {
		g.log.Warn("ghrunner: cannot interrupt run.sh", "err", err)
	}
	g.reloadKill.Reset(g.o.stopTimeout)
}

// childExited handles run.sh's exit outside a drain: after a restart's
// interrupt it is started again; otherwise ghrunner ends with its status.
func (g *ghrunner) childExited() (int, bool) {
	if g.restarting {
		g.restarting = false
		g.reloadKill.Stop()
		g.log.Info("ghrunner: run.sh stopped for the restart", "status", g.child.status)
		c, err := startRunSh(g.o.runnerDir, g.o.runAs, g.out)
		if err == nil {
			g.child = c
			g.log.Info("ghrunner: run.sh started again; registration kept", "pid", c.pid, "runner_id", g.reg.ID)
			return 0, false
		}
		g.log.Error("ghrunner: cannot start run.sh again", "err", err)
		return exitFailed, true
	}
	return g.ended(g.child.status), true
}

// ended handles run.sh ending by itself. The real run.sh exits 0 however
// its listener ended (a crash, its registration removed, a session
// conflict), so its status tells nothing: only an ephemeral runner's end
// after its one job is a clean one. Then the registration is removed (if
// GitHub has not done it already) and ghrunner exits 0. Any other end is a
// failure, exit 1, so that systemd starts ghrunner again; the
// registration is left to that start, which finds it offline, re-runs a
// job it lost, and removes it.
func (g *ghrunner) ended(status int) int {
	if _, _, jobs := g.child.state(); !g.o.ephemeral || jobs == 0 {
		g.log.Error("ghrunner: run.sh ended by itself; its registration is left for the next start to clean up", "status", status, "runner_id", g.reg.ID)
		return exitFailed
	}
	g.log.Info("ghrunner: the ephemeral runner has run its job", "status", status)
	if err := g.unregisterHeeding(); err != nil {
		g.log.Error("ghrunner: cannot remove the registration", "runner_id", g.reg.ID, "err", err)
		return exitFailed
	}
	g.log.Info("ghrunner: registration removed", "runner_id", g.reg.ID)
	return exitOK
}

// unregisterHeeding removes the registration within -stop-timeout, or by
// the end of an imminent notice that comes meanwhile.
func (g *ghrunner) unregisterHeeding() error {
	ctx, cancel := context.WithTimeout(context.Background(), g.o.stopTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.unregister(ctx) }()
	var seen []termsig.Notice
	defer func() {
		for _, nt := range seen {
			(&drain{g: g, nt: nt}).release()
		}
	}()
	for {
		select {
		case err := <-done:
			return err
		case nt, ok := <-g.notices:
			if !ok {
				g.notices = nil
				continue
			}
			if nt.Kind.Imminent() {
				g.log.Warn("ghrunner: imminent notice while removing the registration", "notice", nt)
				seen = append(seen, nt)
				t := time.AfterFunc(time.Until(g.endOf(nt)), cancel)
				defer t.Stop()
			}
		}
	}
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

//go:build unix

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/go-github/v75/github"
)

// removeStale removes the registrations named like this runner that are
// left from an earlier life: offline ones, or the one recorded in the
// runner directory (this machine's own, whose run.sh is not running). A job
// such a runner was running, or its last job if it was left failed by the
// runner going away, is re-run first. An online registration of the same
// name that is not this machine's is another machine's: ghrunner refuses
// to take its name. Failing to clean up a stale registration is logged,
// not fatal: config.sh --replace takes the name over anyway.
func (g *ghrunner) removeStale(ctx context.Context, local *registration) error {
	rs, err := g.api.runnersNamed(ctx, g.o.name)
	if err != nil {
		return err
	}
	for _, r := range rs {
		own := local != nil && local.ID == r.GetID()
		if r.GetStatus() != "offline" && !own {
			return fmt.Errorf("a runner named %q is %s (id %d) and is not this machine's (this runner directory's %s does not record it): give each machine its own -name", g.o.name, r.GetStatus(), r.GetID(), runnerFile)
		}
		g.log.Info("ghrunner: removing a stale registration", "runner_id", r.GetID(), "status", r.GetStatus(), "busy", r.GetBusy(), "this_directory", own)
		g.recoverStale(ctx, r)
		gone, err := g.api.removeRunner(ctx, r.GetID())
		switch {
		case err != nil:
			g.log.Warn("ghrunner: cannot remove the stale registration; config.sh --replace will", "runner_id", r.GetID(), "err", err)
		case !gone:
			g.log.Info("ghrunner: stale registration removed", "runner_id", r.GetID())
		}
	}
	return nil
}

// staleWait bounds the wait for a stale runner's cancelled run to end.
const staleWait = time.Minute

// recoverStale re-runs the work a stale runner left: the job GitHub still
// counts as running on it (cancelled first), or its last job if that was
// left failed by the runner's loss.
func (g *ghrunner) recoverStale(ctx context.Context, r *github.Runner) {
	id := r.GetID()
	var j *jobRef
	var err error
	if r.GetBusy() {
		j, err = g.api.findJob(ctx, id, true)
	} else {
		j, err = g.api.lostJob(ctx, id)
	}
	switch {
	case err != nil:
		g.log.Warn("ghrunner: cannot tell what the stale runner left", "runner_id", id, "err", err)
		return
	case j == nil:
		g.log.Info("ghrunner: the stale runner left no job to re-run", "runner_id", id)
		return
	}
	if r.GetBusy() {
		// Its runner is gone: a plain cancel would wait for it.
		g.log.Warn("ghrunner: the stale runner still counts as running a job: force-cancelling its run", "runner_id", id, "job", j)
		wctx, cancel := context.WithTimeout(ctx, staleWait)
		err = g.api.forceCancel(wctx, j.repo, j.run)
		if err == nil || alreadyCompleted(err) {
			err = g.waitCompleted(wctx, j)
		}
		cancel()
		if err != nil {
			g.log.Warn("ghrunner: the stale runner's run did not end; not re-run", "job", j, "err", err)
			return
		}
	}
	if err := g.rerunRun(ctx, j); err != nil {
		g.log.Warn("ghrunner: cannot re-run the stale runner's job", "job", j, "err", err)
		return
	}
}

// rerunRun re-runs j's run, unless it has had -max-attempts attempts (a
// job that kills its machine, or forges the annotations of a lost one, is
// not re-run for ever); that is logged, and not an error.
func (g *ghrunner) rerunRun(ctx context.Context, j *jobRef) error {
	if j.attempt >= g.o.maxAttempts {
		g.log.Warn("ghrunner: the run is not re-run: it has had -max-attempts attempts", "job", j, "max_attempts", g.o.maxAttempts)
		return nil
	}
	if err := g.api.rerun(ctx, j.repo, j.run, g.o.rerunAll); err != nil {
		return err
	}
	g.log.Info("ghrunner: re-run requested", "job", j, "rerun", rerunWhat(g.o.rerunAll), "new_attempt", j.attempt+1)
	return nil
}

// waitCompleted asks every -poll whether j's run has completed.
func (g *ghrunner) waitCompleted(ctx context.Context, j *jobRef) error {
	t := time.NewTicker(g.o.poll)
	defer t.Stop()
	for {
		run, err := g.api.run(ctx, j.repo, j.run)
		if err != nil {
			return err
		}
		if run.GetStatus() == "completed" {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("wait for run %d to complete: still %s: %w", j.run, run.GetStatus(), context.Cause(ctx))
		}
	}
}

func rerunWhat(all bool) string {
	if all {
		return "all jobs"
	}
	return "failed jobs"
}

//go:build unix

package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghapi"
	"github.com/termsig/termsig/examples/ghrunner/internal/runner"
)

// removeStale removes the registrations named like this runner that are
// left from an earlier life: offline ones, or the one recorded in the
// runner directory (this machine's own, whose run.sh is not running). A job
// such a runner was running, or its last job if it was left failed by the
// runner going away, is re-run first. An online registration of the same
// name that is not this machine's is another machine's: ghrunner refuses
// to take its name. Failing to clean up a stale registration is logged,
// not fatal: config.sh --replace takes the name over anyway.
func (s *supervisor) removeStale(ctx context.Context, local *runner.Registration) error {
	rs, err := s.api.RunnersNamed(ctx, s.cfg.Runner.Name)
	if err != nil {
		return err
	}
	for _, r := range rs {
		own := local != nil && local.ID == r.ID
		if r.Status != "offline" && !own {
			return fmt.Errorf("a runner named %q is %s (id %d) and is not this machine's (this runner directory's %s does not record it): give each machine its own -name", s.cfg.Runner.Name, r.Status, r.ID, runner.RegistrationFile)
		}
		s.log.Info("ghrunner: removing a stale registration", "runner_id", r.ID, "status", r.Status, "busy", r.Busy, "this_directory", own)
		s.recoverStale(ctx, r)
		gone, err := s.api.RemoveRunner(ctx, r.ID)
		switch {
		case err != nil:
			s.log.Warn("ghrunner: cannot remove the stale registration; config.sh --replace will", "runner_id", r.ID, "err", err)
		case !gone:
			s.log.Info("ghrunner: stale registration removed", "runner_id", r.ID)
		}
	}
	return nil
}

// staleWait bounds the wait for a stale runner's cancelled run to end.
const staleWait = time.Minute

// recoverStale re-runs the work a stale runner left: the job GitHub still
// counts as running on it (cancelled first), or its last job if that was
// left failed by the runner's loss.
func (s *supervisor) recoverStale(ctx context.Context, r ghapi.Runner) {
	id := r.ID
	var j *ghapi.Job
	var err error
	if r.Busy {
		j, err = s.api.FindJob(ctx, id, true)
	} else {
		j, err = s.api.LostJob(ctx, id)
	}
	switch {
	case err != nil:
		s.log.Warn("ghrunner: cannot tell what the stale runner left", "runner_id", id, "err", err)
		return
	case j == nil:
		s.log.Info("ghrunner: the stale runner left no job to re-run", "runner_id", id)
		return
	}
	if r.Busy {
		// Its runner is gone: a plain cancel would wait for it.
		s.log.Warn("ghrunner: the stale runner still counts as running a job: force-cancelling its run", "runner_id", id, "job", j)
		wctx, cancel := context.WithTimeout(ctx, staleWait)
		err = s.api.ForceCancel(wctx, j)
		if err == nil || errors.Is(err, ghapi.ErrRunCompleted) {
			err = s.waitCompleted(wctx, j)
		}
		cancel()
		if err != nil {
			s.m.rerun(resultFailed)
			s.log.Warn("ghrunner: the stale runner's run did not end; not re-run", "job", j, "err", err)
			return
		}
	}
	requested, err := s.rerunRun(ctx, j)
	switch {
	case err != nil:
		s.m.rerun(resultFailed)
		s.log.Warn("ghrunner: cannot re-run the stale runner's job", "job", j, "err", err)
	case requested:
		s.m.rerun(resultOK)
	default:
		s.m.rerun(resultMaxAttempts)
	}
}

// rerunRun re-runs j's run, unless it has had -max-attempts attempts (a
// job that kills its machine, or forges the annotations of a lost one, is
// not re-run for ever); that is logged, and not an error: requested is
// false then.
func (s *supervisor) rerunRun(ctx context.Context, j *ghapi.Job) (requested bool, err error) {
	if j.Attempt >= s.cfg.MaxAttempts {
		s.log.Warn("ghrunner: the run is not re-run: it has had -max-attempts attempts", "job", j, "max_attempts", s.cfg.MaxAttempts)
		return false, nil
	}
	if err := s.api.Rerun(ctx, j, s.cfg.RerunAll); err != nil {
		return false, err
	}
	s.log.Info("ghrunner: re-run requested", "job", j, "rerun", rerunWhat(s.cfg.RerunAll), "new_attempt", j.Attempt+1)
	return true, nil
}

// waitCompleted asks every -poll whether j's run has completed.
func (s *supervisor) waitCompleted(ctx context.Context, j *ghapi.Job) error {
	return s.api.WaitCompleted(ctx, j, s.cfg.Poll)
}

func rerunWhat(all bool) string {
	if all {
		return "all jobs"
	}
	return "failed jobs"
}

//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/termsig/termsig/examples/registry"
)

// A CIService is what the runner needs of a CI service. The example
// registry implements it (registryService); a GitHub Actions or GitLab
// implementation would map each method to that service's API (see the
// README).
type CIService interface {
	// Register registers a runner and returns its id.
	Register(ctx context.Context, name string, labels []string) (id string, err error)
	// Lookup returns the ids of the runners registered under name.
	Lookup(ctx context.Context, name string) (ids []string, err error)
	// Remove unregisters a runner. Removing an unknown runner is not an
	// error: it is what the caller wanted.
	Remove(ctx context.Context, id string) error
	// Claim hands the runner its next job, or nil when none is queued.
	Claim(ctx context.Context, runnerID string) (*Job, error)
	// Report records how a job ended (succeeded or failed). It returns
	// an error wrapping ErrJobGone if the job is no longer this runner's.
	Report(ctx context.Context, runnerID string, job *Job, res Result) error
	// Requeue records that a job was interrupted and puts it back in the
	// queue, so that it is run again rather than left failed. It returns
	// an error wrapping ErrJobGone if the job is no longer this runner's.
	Requeue(ctx context.Context, runnerID string, job *Job, res Result) error
}

// ErrJobGone is what Report and Requeue return when the CI service no
// longer gives the job to this runner (it was re-queued when the runner's
// registration was removed, or given to another runner): the result can
// never be delivered, and retrying is pointless.
var ErrJobGone = errors.New("the CI service no longer gives this job to this runner")

// A Job is a command line to run with sh -c.
type Job struct {
	ID      string
	Command string
}

// Result is how one run of a job ended.
type Result struct {
	ExitCode int    // -1 if the job was killed by a signal
	Output   string // the tail of its output
	Reason   string // why it was interrupted, if it was
	Status   string // how it ended, for the log: "exit status 1", "signal: killed"
}

// registryService is the CIService of the example registry.
type registryService struct{ c *registry.Client }

func (s registryService) Register(ctx context.Context, name string, labels []string) (string, error) {
	r, err := s.c.Register(ctx, name, labels)
	return r.ID, err
}

func (s registryService) Lookup(ctx context.Context, name string) ([]string, error) {
	rs, err := s.c.Runners(ctx, name)
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids, err
}

func (s registryService) Remove(ctx context.Context, id string) error {
	if err := s.c.Remove(ctx, id); err != nil && !errors.Is(err, registry.ErrNotFound) {
		return err
	}
	return nil
}

// Claim claims the next job. If the registry says the runner already runs
// a job (the answer to an earlier claim was lost, or a result could not be
// delivered before a crash), that job is one this runner knows nothing of:
// it is handed back to the queue, and the claim is made again.
func (s registryService) Claim(ctx context.Context, runnerID string) (*Job, error) {
	j, err := s.c.Claim(ctx, runnerID)
	if errors.Is(err, registry.ErrConflict) {
		if lost := s.heldBy(ctx, runnerID); lost != "" {
			code := -1
			_, rerr := s.c.Report(ctx, lost, registry.Result{
				RunnerID: runnerID, State: "interrupted", ExitCode: &code,
				Reason: "the runner lost track of it",
			})
			if rerr != nil && !errors.Is(rerr, registry.ErrConflict) {
				return nil, fmt.Errorf("handing back job %s: %w", lost, rerr)
			}
			j, err = s.c.Claim(ctx, runnerID)
		}
	}
	if err != nil || j == nil {
		return nil, err
	}
	return &Job{ID: j.ID, Command: j.Command}, nil
}

// heldBy returns the job the registry says runnerID is running, or "".
func (s registryService) heldBy(ctx context.Context, runnerID string) string {
	rs, err := s.c.Runners(ctx, "")
	if err != nil {
		return ""
	}
	for _, r := range rs {
		if r.ID == runnerID {
			return r.JobID
		}
	}
	return ""
}

func (s registryService) Report(ctx context.Context, runnerID string, job *Job, res Result) error {
	state := registry.JobState("succeeded")
	if res.ExitCode != 0 {
		state = "failed"
	}
	return s.report(ctx, runnerID, job, state, res)
}

func (s registryService) Requeue(ctx context.Context, runnerID string, job *Job, res Result) error {
	return s.report(ctx, runnerID, job, "interrupted", res)
}

func (s registryService) report(ctx context.Context, runnerID string, job *Job, state registry.JobState, res Result) error {
	code := res.ExitCode
	_, err := s.c.Report(ctx, job.ID, registry.Result{
		RunnerID: runnerID,
		State:    state,
		ExitCode: &code,
		Output:   res.Output,
		Reason:   res.Reason,
	})
	if errors.Is(err, registry.ErrConflict) || errors.Is(err, registry.ErrNotFound) {
		return fmt.Errorf("job %s: %w (%v)", job.ID, ErrJobGone, err)
	}
	return err
}

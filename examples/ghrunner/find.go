//go:build unix

package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v75/github"
)

// A jobRef is a workflow job and the run it belongs to.
type jobRef struct {
	repo    repoRef
	run     int64
	attempt int64
	job     int64
	name    string
}

func (j *jobRef) String() string {
	return fmt.Sprintf("job %d (%q) of run %d attempt %d of %s", j.job, j.name, j.run, j.attempt, j.repo)
}

// LogValue logs j as its String.
func (j *jobRef) LogValue() slog.Value { return slog.StringValue(j.String()) }

// searchers bounds how many job listings run at once.
const searchers = 4

// findJob returns the job that runner id is running, or nil if it runs
// none: if GitHub says it is busy, or localBusy (run.sh printed that it
// took a job), it is looked for among the jobs of the in-progress runs.
func (a *api) findJob(ctx context.Context, id int64, localBusy bool) (*jobRef, error) {
	if !localBusy {
		r, err := a.runner(ctx, id)
		if err != nil {
			return nil, err
		}
		if !r.GetBusy() {
			return nil, nil
		}
	}
	return a.search(ctx, "in_progress", 100, func(j *github.WorkflowJob) bool {
		return j.GetRunnerID() == id && j.GetStatus() != "completed"
	})
}

// recentJob returns a job that runner id started after since, in an
// in-progress run or, failing that, a failed one; nil if there is none.
func (a *api) recentJob(ctx context.Context, id int64, since time.Time) (*jobRef, error) {
	ran := func(j *github.WorkflowJob) bool {
		return j.GetRunnerID() == id && !j.GetStartedAt().Before(since)
	}
	j, err := a.search(ctx, "in_progress", 100, ran)
	if j != nil || err != nil {
		return j, err
	}
	return a.search(ctx, "failure", recentFailed, ran)
}

// search returns the first job that match accepts among the jobs of the
// newest perPage runs of status, in each repository the runner serves.
func (a *api) search(ctx context.Context, status string, perPage int, match func(*github.WorkflowJob) bool) (*jobRef, error) {
	repos, err := a.repos(ctx)
	if err != nil {
		return nil, err
	}
	for _, repo := range repos {
		runs, err := a.runs(ctx, repo, status, perPage)
		if err != nil {
			return nil, err
		}
		j, err := a.searchRuns(ctx, repo, runs, match)
		if j != nil || err != nil {
			return j, err
		}
	}
	return nil, nil
}

// searchRuns lists the jobs of runs, a few runs at a time, and returns the
// first job that match accepts (from the newest run that has one).
func (a *api) searchRuns(ctx context.Context, repo repoRef, runs []*github.WorkflowRun, match func(*github.WorkflowJob) bool) (*jobRef, error) {
	found := make([]*jobRef, len(runs))
	errs := make([]error, len(runs))
	sem := make(chan struct{}, searchers)
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			jobs, err := a.jobs(ctx, repo, run.GetID())
			if err != nil {
				errs[i] = err
				return
			}
			for _, j := range jobs {
				if match(j) {
					found[i] = &jobRef{repo: repo, run: run.GetID(), attempt: j.GetRunAttempt(), job: j.GetID(), name: j.GetName()}
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range runs {
		if found[i] != nil {
			return found[i], nil
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// lostMarks are what GitHub writes on a job whose runner went away under
// it: the runner vanished, or it was stopped mid-job.
var lostMarks = []string{
	"lost communication with the server",
	"The runner has received a shutdown signal",
}

// recentFailed is how many of the newest failed runs are searched for a
// stale registration's last job.
const recentFailed = 20

// lostJob returns the last job of runner id if it was left failed by the
// runner going away (GitHub's annotation says so) and its run has not been
// re-run since; nil otherwise. A job that failed by itself is not lost.
func (a *api) lostJob(ctx context.Context, id int64) (*jobRef, error) {
	repos, err := a.repos(ctx)
	if err != nil {
		return nil, err
	}
	for _, repo := range repos {
		runs, err := a.runs(ctx, repo, "failure", recentFailed)
		if err != nil {
			return nil, err
		}
		j, err := a.searchRuns(ctx, repo, runs, func(j *github.WorkflowJob) bool {
			return j.GetRunnerID() == id && j.GetConclusion() == "failure"
		})
		if err != nil {
			return nil, err
		}
		if j == nil {
			continue
		}
		msgs, err := a.annotations(ctx, repo, j.job)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			for _, mark := range lostMarks {
				if strings.Contains(m, mark) {
					return j, nil
				}
			}
		}
		return nil, nil // its last job failed by itself
	}
	return nil, nil
}

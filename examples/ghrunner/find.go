//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/google/go-github/v75/github"
)

// A jobRef is a workflow job and the run it belongs to.
type jobRef struct {
	repo    repoRef
	run     int64
	attempt int64
	job     int64
	name    string
	// completed says the job had completed when it was found.
	completed bool
	// cancelled says ghrunner's cancel of its run was accepted.
	cancelled bool
}

func (j *jobRef) String() string {
	return fmt.Sprintf("job %d (%q) of run %d attempt %d of %s", j.job, j.name, j.run, j.attempt, j.repo)
}

// LogValue logs j as its String.
func (j *jobRef) LogValue() slog.Value { return slog.StringValue(j.String()) }

// ranOn reports whether j ran on runner id: its id and its name, since
// GitHub's hosted runners have ids too, from a series of their own.
func (a *api) ranOn(j *github.WorkflowJob, id int64) bool {
	return j.GetRunnerID() == id && j.GetRunnerName() == a.runnerName
}

// searchers bounds how many job listings run at once.
const searchers = 4

// errNoJob says the job of a busy runner was not found.
var errNoJob = errors.New("its job is not")

// findJob returns the job that runner id is running, or nil if it runs
// none: if GitHub says it is busy, or localBusy (run.sh printed that it
// took a job), it is looked for among the jobs of the in-progress runs.
// A busy runner whose job is not found is an error: the job must not be
// taken for none.
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
	j, err := a.search(ctx, "in_progress", 100, maxPages, func(j *github.WorkflowJob) bool {
		return a.ranOn(j, id) && j.GetStatus() != "completed"
	})
	if j == nil && err == nil {
		err = fmt.Errorf("runner %d is busy, but %w among the newest %d in-progress runs", id, errNoJob, 100*maxPages)
	}
	return j, err
}

// interruptedJob returns the newest job of runner id that still runs, or
// that failed because the runner stopped under it; nil if there is none.
// A job that failed by itself is not one.
func (a *api) interruptedJob(ctx context.Context, id int64) (*jobRef, error) {
	j, err := a.search(ctx, "in_progress", 100, maxPages, func(j *github.WorkflowJob) bool {
		return a.ranOn(j, id) && (j.GetStatus() != "completed" || j.GetConclusion() == "failure")
	})
	if j == nil && err == nil {
		j, err = a.search(ctx, "failure", recentFailed, 1, func(j *github.WorkflowJob) bool {
			return a.ranOn(j, id) && j.GetConclusion() == "failure"
		})
	}
	if j == nil || err != nil || !j.completed {
		return j, err
	}
	return a.ifLost(ctx, j)
}

// interrupted reports whether j, completed, was cancelled, or failed
// because its runner went away: not when it succeeded or failed by itself.
func (a *api) interrupted(ctx context.Context, j *jobRef) (bool, error) {
	var wj *github.WorkflowJob
	err := a.call(ctx, fmt.Sprintf("get job %d of %s", j.job, j.repo), func(ctx context.Context) (r *github.Response, err error) {
		wj, r, err = a.gh.Actions.GetWorkflowJobByID(ctx, j.repo.owner, j.repo.name, j.job)
		return r, err
	})
	if err != nil {
		return false, err
	}
	switch wj.GetConclusion() {
	case "cancelled":
		return true, nil
	case "failure":
		lost, err := a.ifLost(ctx, j)
		return lost != nil, err
	}
	a.log.Info("ghrunner: the job ended by itself before it was stopped: its run is not re-run", "job", j, "conclusion", wj.GetConclusion())
	return false, nil
}

// ifLost returns j if GitHub's annotations say it failed because its
// runner went away, nil if it failed by itself.
func (a *api) ifLost(ctx context.Context, j *jobRef) (*jobRef, error) {
	msgs, err := a.annotations(ctx, j.repo, j.job)
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
	return nil, nil
}

// search returns the first job that match accepts among the jobs of the
// newest perPage runs of status, in each repository the runner serves.
func (a *api) search(ctx context.Context, status string, perPage, pages int, match func(*github.WorkflowJob) bool) (*jobRef, error) {
	repos, err := a.repos(ctx)
	if err != nil {
		return nil, err
	}
	for _, repo := range repos {
		runs, err := a.runs(ctx, repo, status, perPage, pages)
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
					found[i] = &jobRef{repo: repo, run: run.GetID(), attempt: j.GetRunAttempt(), job: j.GetID(), name: j.GetName(), completed: j.GetStatus() == "completed"}
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
	j, err := a.search(ctx, "failure", recentFailed, 1, func(j *github.WorkflowJob) bool {
		return a.ranOn(j, id) && j.GetConclusion() == "failure"
	})
	if j == nil || err != nil {
		return nil, err
	}
	return a.ifLost(ctx, j)
}

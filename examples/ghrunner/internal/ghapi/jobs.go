package ghapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/go-github/v75/github"
)

// ranOn reports whether j ran on runner id: its id and its name, since
// GitHub's hosted runners have ids too, from a series of their own.
func (c *Client) ranOn(j *github.WorkflowJob, id int64) bool {
	return j.GetRunnerID() == id && j.GetRunnerName() == c.runnerName
}

// searchers bounds how many job listings run at once.
const searchers = 4

// ErrNoJob says the job of a busy runner was not found.
var ErrNoJob = errors.New("its job is not")

// FindJob returns the job that runner id is running, or nil if it runs
// none: if GitHub says it is busy, or localBusy (run.sh printed that it
// took a job), it is looked for among the jobs of the in-progress runs.
// A busy runner whose job is not found is an error, ErrNoJob: the job
// must not be taken for none.
func (c *Client) FindJob(ctx context.Context, id int64, localBusy bool) (*Job, error) {
	if !localBusy {
		r, err := c.runner(ctx, id)
		if err != nil {
			return nil, err
		}
		if !r.GetBusy() {
			return nil, nil
		}
	}
	j, err := c.search(ctx, "in_progress", 100, maxPages, func(j *github.WorkflowJob) bool {
		return c.ranOn(j, id) && j.GetStatus() != "completed"
	})
	if j == nil && err == nil {
		err = fmt.Errorf("runner %d is busy, but %w among the newest %d in-progress runs", id, ErrNoJob, 100*maxPages)
	}
	return j, err
}

// InterruptedJob returns the newest job of runner id that still runs, or
// that failed because the runner stopped under it; nil if there is none.
// A job that failed by itself is not one.
func (c *Client) InterruptedJob(ctx context.Context, id int64) (*Job, error) {
	j, err := c.search(ctx, "in_progress", 100, maxPages, func(j *github.WorkflowJob) bool {
		return c.ranOn(j, id) && (j.GetStatus() != "completed" || j.GetConclusion() == "failure")
	})
	if j == nil && err == nil {
		j, err = c.search(ctx, "failure", recentFailed, 1, func(j *github.WorkflowJob) bool {
			return c.ranOn(j, id) && j.GetConclusion() == "failure"
		})
	}
	if j == nil || err != nil || !j.completed {
		return j, err
	}
	return c.ifLost(ctx, j)
}

// Interrupted reports whether j, completed, was cancelled, or failed
// because its runner went away: not when it succeeded or failed by itself.
func (c *Client) Interrupted(ctx context.Context, j *Job) (bool, error) {
	var wj *github.WorkflowJob
	err := c.call(ctx, fmt.Sprintf("get job %d of %s", j.ID, j.Repo), func(ctx context.Context) (r *github.Response, err error) {
		wj, r, err = c.gh.Actions.GetWorkflowJobByID(ctx, j.Repo.Owner, j.Repo.Name, j.ID)
		return r, err
	})
	if err != nil {
		return false, err
	}
	switch wj.GetConclusion() {
	case "cancelled":
		return true, nil
	case "failure":
		lost, err := c.ifLost(ctx, j)
		return lost != nil, err
	}
	c.log.Info("ghrunner: the job ended by itself before it was stopped: its run is not re-run", "job", j, "conclusion", wj.GetConclusion())
	return false, nil
}

// ifLost returns j if GitHub's annotations say it failed because its
// runner went away, nil if it failed by itself.
func (c *Client) ifLost(ctx context.Context, j *Job) (*Job, error) {
	msgs, err := c.annotations(ctx, j.Repo, j.ID)
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
func (c *Client) search(ctx context.Context, status string, perPage, pages int, match func(*github.WorkflowJob) bool) (*Job, error) {
	repos, err := c.repos(ctx)
	if err != nil {
		return nil, err
	}
	for _, repo := range repos {
		runs, err := c.runs(ctx, repo, status, perPage, pages)
		if err != nil {
			return nil, err
		}
		j, err := c.searchRuns(ctx, repo, runs, match)
		if j != nil || err != nil {
			return j, err
		}
	}
	return nil, nil
}

// searchRuns lists the jobs of runs, a few runs at a time, and returns the
// first job that match accepts (from the newest run that has one).
func (c *Client) searchRuns(ctx context.Context, repo Repo, runs []*github.WorkflowRun, match func(*github.WorkflowJob) bool) (*Job, error) {
	found := make([]*Job, len(runs))
	errs := make([]error, len(runs))
	sem := make(chan struct{}, searchers)
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			jobs, err := c.jobs(ctx, repo, run.GetID())
			if err != nil {
				errs[i] = err
				return
			}
			for _, j := range jobs {
				if match(j) {
					found[i] = &Job{Repo: repo, Run: run.GetID(), Attempt: j.GetRunAttempt(), ID: j.GetID(), Name: j.GetName(), completed: j.GetStatus() == "completed"}
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

// LostJob returns the last job of runner id if it was left failed by the
// runner going away (GitHub's annotation says so) and its run has not been
// re-run since; nil otherwise. A job that failed by itself is not lost.
func (c *Client) LostJob(ctx context.Context, id int64) (*Job, error) {
	j, err := c.search(ctx, "failure", recentFailed, 1, func(j *github.WorkflowJob) bool {
		return c.ranOn(j, id) && j.GetConclusion() == "failure"
	})
	if j == nil || err != nil {
		return nil, err
	}
	return c.ifLost(ctx, j)
}

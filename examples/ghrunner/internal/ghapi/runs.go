package ghapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/google/go-github/v75/github"
)

// A Repo names a repository.
type Repo struct{ Owner, Name string }

func (r Repo) String() string { return r.Owner + "/" + r.Name }

// A Job is a workflow job and the run it belongs to.
type Job struct {
	Repo    Repo
	Run     int64 // the run's id
	Attempt int64 // the run's attempt the job is of
	ID      int64
	Name    string
	// completed says the job had completed when it was found.
	completed bool
}

func (j *Job) String() string {
	return fmt.Sprintf("job %d (%q) of run %d attempt %d of %s", j.ID, j.Name, j.Run, j.Attempt, j.Repo)
}

// LogValue logs j as its String.
func (j *Job) LogValue() slog.Value { return slog.StringValue(j.String()) }

// ErrRunCompleted says a run was not cancelled because it has completed
// (GitHub's 409).
var ErrRunCompleted = errors.New("the run has completed")

// completedErr marks GitHub's 409 to a cancel with ErrRunCompleted.
func completedErr(err error) error {
	if status(err) == http.StatusConflict {
		return fmt.Errorf("%w: %w", ErrRunCompleted, err)
	}
	return err
}

// repos are the repositories whose runs may hold this runner's job: the
// runner's own, or the organisation's most recently pushed ones.
func (c *Client) repos(ctx context.Context) ([]Repo, error) {
	if c.org == "" {
		return []Repo{{c.owner, c.repo}}, nil
	}
	var rs []*github.Repository
	err := c.call(ctx, "list the organisation's repositories", func(ctx context.Context) (r *github.Response, err error) {
		rs, r, err = c.gh.Repositories.ListByOrg(ctx, c.org, &github.RepositoryListByOrgOptions{
			Sort: "pushed", Direction: "desc", ListOptions: github.ListOptions{PerPage: 100},
		})
		return r, err
	})
	if err != nil {
		return nil, err
	}
	refs := make([]Repo, 0, len(rs))
	for _, r := range rs {
		if name := r.GetName(); repoName.MatchString(name) && name != "." && name != ".." {
			refs = append(refs, Repo{c.org, name})
		}
	}
	return refs, nil
}

// repoName is what GitHub allows in a repository's name; another name
// from the API, put in a request's path, could make it another request.
var repoName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// runs lists repo's workflow runs of a status (or conclusion), newest
// first, perPage at a time, at most pages pages.
func (c *Client) runs(ctx context.Context, repo Repo, status string, perPage, pages int) ([]*github.WorkflowRun, error) {
	var all []*github.WorkflowRun
	opts := &github.ListWorkflowRunsOptions{Status: status, ListOptions: github.ListOptions{PerPage: perPage}}
	for page := 0; page < pages; page++ {
		var wr *github.WorkflowRuns
		var next int
		err := c.call(ctx, fmt.Sprintf("list the %s runs of %s", status, repo), func(ctx context.Context) (r *github.Response, err error) {
			wr, r, err = c.gh.Actions.ListRepositoryWorkflowRuns(ctx, repo.Owner, repo.Name, opts)
			if r != nil {
				next = r.NextPage
			}
			return r, err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, wr.WorkflowRuns...)
		if next == 0 {
			break
		}
		opts.Page = next
	}
	return all, nil
}

// jobs lists the jobs of run's latest attempt.
func (c *Client) jobs(ctx context.Context, repo Repo, run int64) ([]*github.WorkflowJob, error) {
	var all []*github.WorkflowJob
	opts := &github.ListWorkflowJobsOptions{Filter: "latest", ListOptions: github.ListOptions{PerPage: 100}}
	for page := 0; page < maxPages; page++ {
		var js *github.Jobs
		var next int
		err := c.call(ctx, fmt.Sprintf("list the jobs of run %d of %s", run, repo), func(ctx context.Context) (r *github.Response, err error) {
			js, r, err = c.gh.Actions.ListWorkflowJobs(ctx, repo.Owner, repo.Name, run, opts)
			if r != nil {
				next = r.NextPage
			}
			return r, err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, js.Jobs...)
		if next == 0 {
			break
		}
		opts.Page = next
	}
	return all, nil
}

// WaitCompleted asks every poll whether j's run has completed, until it
// has or ctx ends.
func (c *Client) WaitCompleted(ctx context.Context, j *Job, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		var run *github.WorkflowRun
		err := c.call(ctx, fmt.Sprintf("get run %d of %s", j.Run, j.Repo), func(ctx context.Context) (r *github.Response, err error) {
			run, r, err = c.gh.Actions.GetWorkflowRunByID(ctx, j.Repo.Owner, j.Repo.Name, j.Run)
			return r, err
		})
		if err != nil {
			return err
		}
		if run.GetStatus() == "completed" {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("wait for run %d to complete: still %s: %w", j.Run, run.GetStatus(), context.Cause(ctx))
		}
	}
}

// Cancel cancels j's run. One that has completed is not cancelled: the
// error is then ErrRunCompleted.
func (c *Client) Cancel(ctx context.Context, j *Job) error {
	return completedErr(c.call(ctx, fmt.Sprintf("cancel run %d of %s", j.Run, j.Repo), func(ctx context.Context) (*github.Response, error) {
		return c.gh.Actions.CancelWorkflowRunByID(ctx, j.Repo.Owner, j.Repo.Name, j.Run)
	}))
}

// ForceCancel cancels j's run without waiting for its runners, which
// GitHub otherwise does (a runner that is gone then holds the run until
// GitHub gives it up as lost, minutes later); ErrRunCompleted as for
// Cancel. go-github has no method for it.
func (c *Client) ForceCancel(ctx context.Context, j *Job) error {
	return completedErr(c.call(ctx, fmt.Sprintf("force-cancel run %d of %s", j.Run, j.Repo), func(ctx context.Context) (*github.Response, error) {
		req, err := c.gh.NewRequest("POST", fmt.Sprintf("repos/%v/%v/actions/runs/%v/force-cancel", j.Repo.Owner, j.Repo.Name, j.Run), nil)
		if err != nil {
			return nil, err
		}
		return c.gh.Do(ctx, req, nil)
	}))
}

// Rerun re-runs j's run: all its jobs, or only its failed and cancelled
// ones.
func (c *Client) Rerun(ctx context.Context, j *Job, all bool) error {
	if all {
		return c.call(ctx, fmt.Sprintf("re-run run %d of %s", j.Run, j.Repo), func(ctx context.Context) (*github.Response, error) {
			return c.gh.Actions.RerunWorkflowByID(ctx, j.Repo.Owner, j.Repo.Name, j.Run)
		})
	}
	return c.call(ctx, fmt.Sprintf("re-run the failed jobs of run %d of %s", j.Run, j.Repo), func(ctx context.Context) (*github.Response, error) {
		return c.gh.Actions.RerunFailedJobsByID(ctx, j.Repo.Owner, j.Repo.Name, j.Run)
	})
}

// annotations returns the messages of a job's check run.
func (c *Client) annotations(ctx context.Context, repo Repo, job int64) ([]string, error) {
	var as []*github.CheckRunAnnotation
	err := c.call(ctx, fmt.Sprintf("get the annotations of job %d of %s", job, repo), func(ctx context.Context) (r *github.Response, err error) {
		as, r, err = c.gh.Checks.ListCheckRunAnnotations(ctx, repo.Owner, repo.Name, job, &github.ListOptions{PerPage: 50})
		return r, err
	})
	msgs := make([]string, 0, len(as))
	for _, an := range as {
		msgs = append(msgs, an.GetMessage())
	}
	return msgs, err
}

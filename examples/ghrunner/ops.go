//go:build unix

package main

import (
	"context"
	"fmt"
	"regexp"

	"github.com/google/go-github/v75/github"
)

// A repoRef names a repository.
type repoRef struct{ owner, name string }

func (r repoRef) String() string { return r.owner + "/" + r.name }

// maxPages bounds every listing: ghrunner looks at the newest few hundred
// items of anything, never an unbounded history.
const maxPages = 3

func (a *api) registrationToken(ctx context.Context) (string, error) {
	var tok *github.RegistrationToken
	err := a.call(ctx, "get a registration token", func(ctx context.Context) (r *github.Response, err error) {
		if a.org != "" {
			tok, r, err = a.gh.Actions.CreateOrganizationRegistrationToken(ctx, a.org)
		} else {
			tok, r, err = a.gh.Actions.CreateRegistrationToken(ctx, a.owner, a.repo)
		}
		return r, err
	})
	if err != nil {
		return "", err
	}
	if tok.GetToken() == "" {
		return "", fmt.Errorf("get a registration token: the answer has no token")
	}
	return tok.GetToken(), nil
}

// runnersNamed lists the registrations called name.
func (a *api) runnersNamed(ctx context.Context, name string) ([]*github.Runner, error) {
	var all []*github.Runner
	opts := &github.ListRunnersOptions{Name: &name, ListOptions: github.ListOptions{PerPage: 100}}
	for page := 0; page < maxPages; page++ {
		var rs *github.Runners
		var next int
		err := a.call(ctx, "list the runners named "+name, func(ctx context.Context) (r *github.Response, err error) {
			if a.org != "" {
				rs, r, err = a.gh.Actions.ListOrganizationRunners(ctx, a.org, opts)
			} else {
				rs, r, err = a.gh.Actions.ListRunners(ctx, a.owner, a.repo, opts)
			}
			if r != nil {
				next = r.NextPage
			}
			return r, err
		})
		if err != nil {
			return nil, err
		}
		for _, r := range rs.Runners {
			if r.GetName() == name { // whatever the server's filter did
				all = append(all, r)
			}
		}
		if next == 0 {
			break
		}
		opts.Page = next
	}
	return all, nil
}

func (a *api) runner(ctx context.Context, id int64) (*github.Runner, error) {
	var rn *github.Runner
	err := a.call(ctx, fmt.Sprintf("get runner %d", id), func(ctx context.Context) (r *github.Response, err error) {
		if a.org != "" {
			rn, r, err = a.gh.Actions.GetOrganizationRunner(ctx, a.org, id)
		} else {
			rn, r, err = a.gh.Actions.GetRunner(ctx, a.owner, a.repo, id)
		}
		return r, err
	})
	return rn, err
}

// removeRunner deletes registration id; one that is gone already (an
// ephemeral runner after its job) is not an error.
func (a *api) removeRunner(ctx context.Context, id int64) (gone bool, err error) {
	err = a.call(ctx, fmt.Sprintf("remove the registration of runner %d", id), func(ctx context.Context) (*github.Response, error) {
		if a.org != "" {
			return a.gh.Actions.RemoveOrganizationRunner(ctx, a.org, id)
		}
		return a.gh.Actions.RemoveRunner(ctx, a.owner, a.repo, id)
	})
	if notFound(err) {
		return true, nil
	}
	return false, err
}

// repos are the repositories whose runs may hold this runner's job: the
// runner's own, or the organisation's most recently pushed ones.
func (a *api) repos(ctx context.Context) ([]repoRef, error) {
	if a.org == "" {
		return []repoRef{{a.owner, a.repo}}, nil
	}
	var rs []*github.Repository
	err := a.call(ctx, "list the organisation's repositories", func(ctx context.Context) (r *github.Response, err error) {
		rs, r, err = a.gh.Repositories.ListByOrg(ctx, a.org, &github.RepositoryListByOrgOptions{
			Sort: "pushed", Direction: "desc", ListOptions: github.ListOptions{PerPage: 100},
		})
		return r, err
	})
	if err != nil {
		return nil, err
	}
	refs := make([]repoRef, 0, len(rs))
	for _, r := range rs {
		if name := r.GetName(); repoName.MatchString(name) && name != "." && name != ".." {
			refs = append(refs, repoRef{a.org, name})
		}
	}
	return refs, nil
}

// repoName is what GitHub allows in a repository's name; another name
// from the API, put in a request's path, could make it another request.
var repoName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// runs lists repo's workflow runs of a status (or conclusion), newest
// first, perPage at a time, at most pages pages.
func (a *api) runs(ctx context.Context, repo repoRef, status string, perPage, pages int) ([]*github.WorkflowRun, error) {
	var all []*github.WorkflowRun
	opts := &github.ListWorkflowRunsOptions{Status: status, ListOptions: github.ListOptions{PerPage: perPage}}
	for page := 0; page < pages; page++ {
		var wr *github.WorkflowRuns
		var next int
		err := a.call(ctx, fmt.Sprintf("list the %s runs of %s", status, repo), func(ctx context.Context) (r *github.Response, err error) {
			wr, r, err = a.gh.Actions.ListRepositoryWorkflowRuns(ctx, repo.owner, repo.name, opts)
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
func (a *api) jobs(ctx context.Context, repo repoRef, run int64) ([]*github.WorkflowJob, error) {
	var all []*github.WorkflowJob
	opts := &github.ListWorkflowJobsOptions{Filter: "latest", ListOptions: github.ListOptions{PerPage: 100}}
	for page := 0; page < maxPages; page++ {
		var js *github.Jobs
		var next int
		err := a.call(ctx, fmt.Sprintf("list the jobs of run %d of %s", run, repo), func(ctx context.Context) (r *github.Response, err error) {
			js, r, err = a.gh.Actions.ListWorkflowJobs(ctx, repo.owner, repo.name, run, opts)
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

func (a *api) run(ctx context.Context, repo repoRef, id int64) (*github.WorkflowRun, error) {
	var run *github.WorkflowRun
	err := a.call(ctx, fmt.Sprintf("get run %d of %s", id, repo), func(ctx context.Context) (r *github.Response, err error) {
		run, r, err = a.gh.Actions.GetWorkflowRunByID(ctx, repo.owner, repo.name, id)
		return r, err
	})
	return run, err
}

func (a *api) cancel(ctx context.Context, repo repoRef, id int64) error {
	return a.call(ctx, fmt.Sprintf("cancel run %d of %s", id, repo), func(ctx context.Context) (*github.Response, error) {
		return a.gh.Actions.CancelWorkflowRunByID(ctx, repo.owner, repo.name, id)
	})
}

func (a *api) rerun(ctx context.Context, repo repoRef, id int64, all bool) error {
	if all {
		return a.call(ctx, fmt.Sprintf("re-run run %d of %s", id, repo), func(ctx context.Context) (*github.Response, error) {
			return a.gh.Actions.RerunWorkflowByID(ctx, repo.owner, repo.name, id)
		})
	}
	return a.call(ctx, fmt.Sprintf("re-run the failed jobs of run %d of %s", id, repo), func(ctx context.Context) (*github.Response, error) {
		return a.gh.Actions.RerunFailedJobsByID(ctx, repo.owner, repo.name, id)
	})
}

// annotations returns the messages of a job's check run.
func (a *api) annotations(ctx context.Context, repo repoRef, job int64) ([]string, error) {
	var as []*github.CheckRunAnnotation
	err := a.call(ctx, fmt.Sprintf("get the annotations of job %d of %s", job, repo), func(ctx context.Context) (r *github.Response, err error) {
		as, r, err = a.gh.Checks.ListCheckRunAnnotations(ctx, repo.owner, repo.name, job, &github.ListOptions{PerPage: 50})
		return r, err
	})
	msgs := make([]string, 0, len(as))
	for _, an := range as {
		msgs = append(msgs, an.GetMessage())
	}
	return msgs, err
}

// forceCancel cancels run id without waiting for its runners, which
// GitHub otherwise does (a runner that is gone then holds the run until
// GitHub gives it up as lost, minutes later). go-github has no method for
// it.
func (a *api) forceCancel(ctx context.Context, repo repoRef, id int64) error {
	return a.call(ctx, fmt.Sprintf("force-cancel run %d of %s", id, repo), func(ctx context.Context) (*github.Response, error) {
		req, err := a.gh.NewRequest("POST", fmt.Sprintf("repos/%v/%v/actions/runs/%v/force-cancel", repo.owner, repo.name, id), nil)
		if err != nil {
			return nil, err
		}
		return a.gh.Do(ctx, req, nil)
	})
}

package ghapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-github/v75/github"
)

// A Runner is a runner's registration, as GitHub lists it.
type Runner struct {
	ID     int64
	Name   string
	Status string // "online" or "offline"
	Busy   bool   // GitHub counts it as running a job
}

func runnerOf(r *github.Runner) Runner {
	return Runner{ID: r.GetID(), Name: r.GetName(), Status: r.GetStatus(), Busy: r.GetBusy()}
}

// ErrRunnerBusy says a runner was not removed because GitHub still counts
// it as running a job (its 422).
var ErrRunnerBusy = errors.New("the runner is still busy")

// maxPages bounds every listing: ghrunner looks at the newest few hundred
// items of anything, never an unbounded history.
const maxPages = 3

// RegistrationToken returns a token for config.sh to register a runner
// with.
func (c *Client) RegistrationToken(ctx context.Context) (string, error) {
	var tok *github.RegistrationToken
	err := c.call(ctx, "get a registration token", func(ctx context.Context) (r *github.Response, err error) {
		if c.org != "" {
			tok, r, err = c.gh.Actions.CreateOrganizationRegistrationToken(ctx, c.org)
		} else {
			tok, r, err = c.gh.Actions.CreateRegistrationToken(ctx, c.owner, c.repo)
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

// RunnersNamed lists the registrations called name.
func (c *Client) RunnersNamed(ctx context.Context, name string) ([]Runner, error) {
	var all []Runner
	opts := &github.ListRunnersOptions{Name: &name, ListOptions: github.ListOptions{PerPage: 100}}
	for page := 0; page < maxPages; page++ {
		var rs *github.Runners
		var next int
		err := c.call(ctx, "list the runners named "+name, func(ctx context.Context) (r *github.Response, err error) {
			if c.org != "" {
				rs, r, err = c.gh.Actions.ListOrganizationRunners(ctx, c.org, opts)
			} else {
				rs, r, err = c.gh.Actions.ListRunners(ctx, c.owner, c.repo, opts)
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
				all = append(all, runnerOf(r))
			}
		}
		if next == 0 {
			break
		}
		opts.Page = next
	}
	return all, nil
}

func (c *Client) runner(ctx context.Context, id int64) (*github.Runner, error) {
	var rn *github.Runner
	err := c.call(ctx, fmt.Sprintf("get runner %d", id), func(ctx context.Context) (r *github.Response, err error) {
		if c.org != "" {
			rn, r, err = c.gh.Actions.GetOrganizationRunner(ctx, c.org, id)
		} else {
			rn, r, err = c.gh.Actions.GetRunner(ctx, c.owner, c.repo, id)
		}
		return r, err
	})
	return rn, err
}

// RemoveRunner deletes registration id; one that is gone already (an
// ephemeral runner after its job) is not an error, and gone says so. A
// runner GitHub still counts busy is not removed: the error is
// ErrRunnerBusy.
func (c *Client) RemoveRunner(ctx context.Context, id int64) (gone bool, err error) {
	err = c.call(ctx, fmt.Sprintf("remove the registration of runner %d", id), func(ctx context.Context) (*github.Response, error) {
		if c.org != "" {
			return c.gh.Actions.RemoveOrganizationRunner(ctx, c.org, id)
		}
		return c.gh.Actions.RemoveRunner(ctx, c.owner, c.repo, id)
	})
	switch status(err) {
	case http.StatusNotFound:
		return true, nil
	case http.StatusUnprocessableEntity:
		return false, fmt.Errorf("%w: %w", ErrRunnerBusy, err)
	}
	return false, err
}

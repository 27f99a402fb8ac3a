package ghfake

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// get sends a GET to the server with an Authorization header (none if
// "") and returns the status, the headers and the decoded JSON body.
func get(t *testing.T, s *Server, path, auth string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL()+path, nil)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	return resp.StatusCode, resp.Header, body
}

func TestAuth(t *testing.T) {
	s := start(t, Config{})
	for _, tc := range []struct {
		name, auth string
		status     int
	}{
		{"bearer", "Bearer " + testToken, http.StatusOK},
		{"token scheme", "token " + testToken, http.StatusOK},
		{"wrong token", "Bearer ghp_wrong", http.StatusUnauthorized},
		{"basic", "Basic " + testToken, http.StatusUnauthorized},
		{"none", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := get(t, s, "/api/v3/repos/acme/app/actions/runners", tc.auth)
			require.Equal(t, tc.status, status)
			assert.Equal(t, "application/json; charset=utf-8", h.Get("Content-Type"))
			assert.Equal(t, "5000", h.Get("X-RateLimit-Limit"))
			if status == http.StatusUnauthorized {
				assert.Equal(t, map[string]any{"message": "Bad credentials",
					"documentation_url": "https://docs.github.com/rest", "status": "401"}, body)
			}
		})
	}
	t.Run("go-github", func(t *testing.T) {
		_, _, err := client(t, s, "").Actions.ListRunners(context.Background(), "acme", "app", nil)
		var er *github.ErrorResponse
		require.ErrorAs(t, err, &er)
		assert.Equal(t, http.StatusUnauthorized, er.Response.StatusCode)
		assert.Equal(t, "Bad credentials", er.Message)
	})
}

func TestHeadersAndNotFound(t *testing.T) {
	s := start(t, Config{})
	status, h, body := get(t, s, "/api/v3/repos/acme/app/nothing-here", "Bearer "+testToken)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "Not Found", body["message"])
	assert.Equal(t, "https://docs.github.com/rest", body["documentation_url"])
	for _, name := range []string{"X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Used"} {
		assert.Regexp(t, `^\d+$`, h.Get(name), name)
	}
	assert.Equal(t, "core", h.Get("X-RateLimit-Resource"))
	assert.Equal(t, "2022-11-28", h.Get("X-GitHub-Api-Version-Selected"))

	gh := client(t, s, testToken)
	_, r1, err := gh.Actions.ListRunners(context.Background(), "acme", "app", nil)
	require.NoError(t, err)
	_, r2, err := gh.Actions.GetRunner(context.Background(), "acme", "app", 42)
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er)
	assert.Equal(t, http.StatusNotFound, er.Response.StatusCode)
	assert.Equal(t, 5000, r1.Rate.Limit)
	assert.Equal(t, r1.Rate.Remaining-1, r2.Rate.Remaining, "each request is counted")
	assert.WithinDuration(t, time.Now().Add(time.Hour), r1.Rate.Reset.Time, 2*time.Second)

	status, _, _ = get(t, s, "/elsewhere", "")
	assert.Equal(t, http.StatusNotFound, status)
}

func TestRegistrationToken(t *testing.T) {
	s := start(t, Config{})
	gh := client(t, s, testToken)
	tok, resp, err := gh.Actions.CreateRegistrationToken(context.Background(), "acme", "app")
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Regexp(t, regexp.MustCompile(`^[A-Z0-9]{29}$`), tok.GetToken())
	assert.WithinDuration(t, time.Now().Add(time.Hour), tok.GetExpiresAt().Time, 2*time.Second)
	org, _, err := gh.Actions.CreateOrganizationRegistrationToken(context.Background(), "acme")
	require.NoError(t, err)
	assert.NotEqual(t, tok.GetToken(), org.GetToken())
}

func TestRunnersListGetDelete(t *testing.T) {
	s := start(t, Config{})
	gh := client(t, s, testToken)
	ctx := context.Background()
	var ids []int64
	for i := range 5 {
		ids = append(ids, s.AddRunner("acme/app", RunnerSpec{Name: "r" + strconv.Itoa(i), Labels: []string{"gpu"}, Online: i%2 == 0, Busy: i == 1}))
	}
	s.AddRunner("other/app", RunnerSpec{Name: "r0"})
	orgID := s.AddRunner("acme", RunnerSpec{Name: "org-1"})

	named, _, err := gh.Actions.ListRunners(ctx, "acme", "app", &github.ListRunnersOptions{Name: github.Ptr("r1")})
	require.NoError(t, err)
	require.Equal(t, 1, named.TotalCount)
	r := named.Runners[0]
	assert.Equal(t, ids[1], r.GetID())
	assert.Equal(t, "offline", r.GetStatus())
	assert.True(t, r.GetBusy())
	assert.Equal(t, "linux", r.GetOS())
	require.Len(t, r.Labels, 4)
	assert.Equal(t, []string{"self-hosted", "read-only"}, []string{r.Labels[0].GetName(), r.Labels[0].GetType()})
	assert.Equal(t, []string{"gpu", "custom"}, []string{r.Labels[3].GetName(), r.Labels[3].GetType()})

	page1, resp, err := gh.Actions.ListRunners(ctx, "acme", "app", &github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: 2}})
	require.NoError(t, err)
	assert.Equal(t, 5, page1.TotalCount)
	assert.Len(t, page1.Runners, 2)
	assert.Equal(t, "online", page1.Runners[0].GetStatus())
	assert.Equal(t, 2, resp.NextPage)
	assert.Equal(t, 3, resp.LastPage)
	page3, resp, err := gh.Actions.ListRunners(ctx, "acme", "app", &github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: 2, Page: 3}})
	require.NoError(t, err)
	assert.Len(t, page3.Runners, 1)
	assert.Equal(t, 0, resp.NextPage)
	assert.Equal(t, 2, resp.PrevPage)

	orgs, _, err := gh.Actions.ListOrganizationRunners(ctx, "acme", nil)
	require.NoError(t, err)
	require.Equal(t, 1, orgs.TotalCount)
	assert.Equal(t, orgID, orgs.Runners[0].GetID())
	_, _, err = gh.Actions.GetRunner(ctx, "other", "app", ids[0])
	assertStatus(t, err, http.StatusNotFound)
	got, _, err := gh.Actions.GetOrganizationRunner(ctx, "acme", orgID)
	require.NoError(t, err)
	assert.Equal(t, "org-1", got.GetName())

	_, err = gh.Actions.RemoveRunner(ctx, "acme", "app", ids[1])
	er := assertStatus(t, err, http.StatusUnprocessableEntity)
	assert.Equal(t, `Bad request - Runner "r1" is still running a job"`, er.Message)
	resp, err = gh.Actions.RemoveRunner(ctx, "acme", "app", ids[0])
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	_, ok := s.Runner(ids[0])
	assert.False(t, ok, "deleted")
	_, err = gh.Actions.RemoveRunner(ctx, "acme", "app", ids[0])
	assertStatus(t, err, http.StatusNotFound)
	_, err = gh.Actions.RemoveOrganizationRunner(ctx, "acme", orgID)
	require.NoError(t, err)
}

// assertStatus asserts that err is GitHub's answer with status.
func assertStatus(t *testing.T, err error, status int) *github.ErrorResponse {
	t.Helper()
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er)
	assert.Equal(t, status, er.Response.StatusCode, er.Message)
	return er
}

func TestRunsCancelRerun(t *testing.T) {
	s := start(t, Config{})
	gh := client(t, s, testToken)
	ctx := context.Background()
	old := s.AddRun("acme/app", RunSpec{})
	id := s.AddRun("acme/app", RunSpec{Name: "Test", Jobs: []JobSpec{{Name: "unit"}, {Name: "lint", Labels: []string{"self-hosted", "big"}}}})

	runs, _, err := gh.Actions.ListRepositoryWorkflowRuns(ctx, "acme", "app", &github.ListWorkflowRunsOptions{Status: "queued"})
	require.NoError(t, err)
	require.Equal(t, 2, runs.GetTotalCount())
	assert.Equal(t, []int64{id, old}, []int64{runs.WorkflowRuns[0].GetID(), runs.WorkflowRuns[1].GetID()}, "newest first")
	run, _, err := gh.Actions.GetWorkflowRunByID(ctx, "acme", "app", id)
	require.NoError(t, err)
	assert.Equal(t, "Test", run.GetName())
	assert.Equal(t, 2, run.GetRunNumber())
	assert.Equal(t, 1, run.GetRunAttempt())
	assert.Equal(t, StatusQueued, run.GetStatus())
	assert.Nil(t, run.Conclusion)
	assert.Equal(t, "acme/app", run.GetRepository().GetFullName())
	assert.Equal(t, "acme", run.GetRepository().GetOwner().GetLogin())
	assert.Equal(t, s.URL()+"/acme/app/actions/runs/"+strconv.FormatInt(id, 10), run.GetHTMLURL())
	_, _, err = gh.Actions.GetWorkflowRunByID(ctx, "other", "app", id)
	assertStatus(t, err, http.StatusNotFound)

	jobs, _, err := gh.Actions.ListWorkflowJobs(ctx, "acme", "app", id, nil)
	require.NoError(t, err)
	require.Equal(t, 2, jobs.GetTotalCount())
	lint := jobs.Jobs[1]
	assert.Equal(t, "lint", lint.GetName())
	assert.Equal(t, []string{"self-hosted", "big"}, lint.Labels)
	assert.Equal(t, id, lint.GetRunID())
	assert.Nil(t, lint.RunnerID)
	assert.EqualValues(t, 1, lint.GetRunAttempt())

	_, err = gh.Actions.RerunFailedJobsByID(ctx, "acme", "app", id)
	er := assertStatus(t, err, http.StatusForbidden)
	assert.Equal(t, "This workflow run cannot be retried", er.Message)
	var rl *github.RateLimitError
	assert.False(t, errors.As(err, &rl), "not a rate limit")

	_, err = gh.Actions.CancelWorkflowRunByID(ctx, "acme", "app", id)
	var accepted *github.AcceptedError
	require.ErrorAs(t, err, &accepted)
	got, _ := s.Run(id)
	assert.Equal(t, StatusCompleted, got.Status, "queued jobs are cancelled at once")
	assert.Equal(t, ConclusionCancelled, got.Conclusion)
	assert.True(t, got.CancelRequested)
	_, err = gh.Actions.CancelWorkflowRunByID(ctx, "acme", "app", id)
	er = assertStatus(t, err, http.StatusConflict)
	assert.Equal(t, "Cannot cancel a workflow run that is completed.", er.Message)
	cancelled, _, err := gh.Actions.ListRepositoryWorkflowRuns(ctx, "acme", "app", &github.ListWorkflowRunsOptions{Status: "cancelled"})
	require.NoError(t, err)
	assert.Equal(t, 1, cancelled.GetTotalCount(), "status takes a conclusion too")

	checkRerun(t, s, gh, id, jobs.Jobs)
}

// checkRerun re-runs run id's failed jobs, whose first attempt's jobs
// were first, and checks the new attempt.
func checkRerun(t *testing.T, s *Server, gh *github.Client, id int64, first []*github.WorkflowJob) {
	ctx := context.Background()
	resp, err := gh.Actions.RerunFailedJobsByID(ctx, "acme", "app", id)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	run, _, err := gh.Actions.GetWorkflowRunByID(ctx, "acme", "app", id)
	require.NoError(t, err)
	assert.Equal(t, 2, run.GetRunAttempt())
	assert.Equal(t, StatusQueued, run.GetStatus())
	assert.Nil(t, run.Conclusion)
	latest, _, err := gh.Actions.ListWorkflowJobs(ctx, "acme", "app", id, &github.ListWorkflowJobsOptions{Filter: "latest"})
	require.NoError(t, err)
	require.Len(t, latest.Jobs, 2)
	for i, j := range latest.Jobs {
		assert.NotEqual(t, first[i].GetID(), j.GetID(), "a new job")
		assert.EqualValues(t, 2, j.GetRunAttempt())
		assert.Equal(t, StatusQueued, j.GetStatus())
	}
	all, _, err := gh.Actions.ListWorkflowJobs(ctx, "acme", "app", id, &github.ListWorkflowJobsOptions{Filter: "all"})
	require.NoError(t, err)
	assert.Equal(t, 4, all.GetTotalCount())
	_, err = gh.Actions.RerunWorkflowByID(ctx, "acme", "app", id)
	assertStatus(t, err, http.StatusForbidden)
	got, _ := s.Run(id)
	assert.Equal(t, []string{"failed"}, got.Reruns)
	assert.Len(t, got.AllJobs, 4)
	assert.True(t, got.CancelRequested, "a cancel of an earlier attempt")
}

func TestRerunAllOfASuccess(t *testing.T) {
	s := start(t, Config{})
	gh := client(t, s, testToken)
	ctx := context.Background()
	id, _ := s.AddLostJob("acme/app", 7, "spot-1")
	_, err := gh.Actions.RerunWorkflowByID(ctx, "acme", "app", id)
	require.NoError(t, err)
	got, _ := s.Run(id)
	assert.Equal(t, []string{"all"}, got.Reruns)
	assert.Equal(t, 2, got.Attempt)
	assert.Equal(t, StatusQueued, got.Status)
}

func TestLostJobAnnotationsAndOrgRepos(t *testing.T) {
	s := start(t, Config{})
	gh := client(t, s, testToken)
	ctx := context.Background()
	stale := s.AddRunner("acme/app", RunnerSpec{Name: "spot-1"})
	s.AddRun("other/x", RunSpec{})
	s.AddRun("acme/app", RunSpec{})
	runID, jobID := s.AddLostJob("acme/lib", stale, "spot-1")

	failed, _, err := gh.Actions.ListRepositoryWorkflowRuns(ctx, "acme", "lib", &github.ListWorkflowRunsOptions{Status: "failure"})
	require.NoError(t, err)
	require.Equal(t, 1, failed.GetTotalCount())
	assert.Equal(t, runID, failed.WorkflowRuns[0].GetID())
	assert.Equal(t, ConclusionFailure, failed.WorkflowRuns[0].GetConclusion())
	jobs, _, err := gh.Actions.ListWorkflowJobs(ctx, "acme", "lib", runID, nil)
	require.NoError(t, err)
	j := jobs.Jobs[0]
	assert.Equal(t, jobID, j.GetID())
	assert.Equal(t, stale, j.GetRunnerID())
	assert.Equal(t, "spot-1", j.GetRunnerName())
	assert.Equal(t, ConclusionFailure, j.GetConclusion())
	assert.False(t, j.GetCompletedAt().IsZero())

	notes, _, err := gh.Checks.ListCheckRunAnnotations(ctx, "acme", "lib", jobID, nil)
	require.NoError(t, err)
	require.Len(t, notes, 1)
	assert.Equal(t, "failure", notes[0].GetAnnotationLevel())
	assert.Equal(t, LostMessage("spot-1"), notes[0].GetMessage())
	assert.Contains(t, notes[0].GetMessage(), "The self-hosted runner: spot-1 lost communication with the server.")
	_, _, err = gh.Checks.ListCheckRunAnnotations(ctx, "acme", "app", jobID, nil)
	assertStatus(t, err, http.StatusNotFound)

	repos, _, err := gh.Repositories.ListByOrg(ctx, "acme", &github.RepositoryListByOrgOptions{Sort: "updated"})
	require.NoError(t, err)
	require.Len(t, repos, 2)
	assert.Equal(t, []string{"acme/lib", "acme/app"}, []string{repos[0].GetFullName(), repos[1].GetFullName()}, "newest first")
}

// listRunners lists acme/app's runners.
func listRunners(gh *github.Client) (*github.Response, error) {
	_, resp, err := gh.Actions.ListRunners(context.Background(), "acme", "app", nil)
	return resp, err
}

func TestFaultStatus(t *testing.T) {
	s := start(t, Config{})
	t.Run("once", func(t *testing.T) {
		gh := client(t, s, testToken)
		s.Inject(Fault{Method: "POST", Status: http.StatusServiceUnavailable})
		s.Inject(Fault{Method: "GET", Path: "/actions/runners", Times: 1, Status: http.StatusBadGateway})
		defer s.ClearFaults()
		_, err := listRunners(gh)
		assert.Equal(t, "Server Error", assertStatus(t, err, http.StatusBadGateway).Message)
		_, err = listRunners(gh)
		require.NoError(t, err, "Times: 1")
		_, _, err = gh.Actions.CreateRegistrationToken(context.Background(), "acme", "app")
		assertStatus(t, err, http.StatusServiceUnavailable)
	})
	t.Run("until cleared", func(t *testing.T) {
		gh := client(t, s, testToken)
		s.Inject(Fault{Status: http.StatusInternalServerError})
		for range 3 {
			_, err := listRunners(gh)
			assertStatus(t, err, http.StatusInternalServerError)
		}
		s.ClearFaults()
		_, err := listRunners(gh)
		require.NoError(t, err)
	})
	t.Run("bad fault", func(t *testing.T) {
		s.Inject(Fault{Times: 1, RateLimit: "tertiary"})
		_, err := listRunners(client(t, s, testToken))
		assert.Contains(t, assertStatus(t, err, http.StatusInternalServerError).Message, `"tertiary"`)
	})
}

func TestFaultRateLimits(t *testing.T) {
	s := start(t, Config{})
	t.Run("primary", func(t *testing.T) {
		s.Inject(Fault{Times: 1, RateLimit: RateLimitPrimary, Wait: 2500 * time.Millisecond})
		before := time.Now()
		_, err := listRunners(client(t, s, testToken))
		var rl *github.RateLimitError
		require.ErrorAs(t, err, &rl)
		assert.Equal(t, 0, rl.Rate.Remaining)
		assert.Equal(t, 5000, rl.Rate.Limit)
		assert.False(t, rl.Rate.Reset.Before(before.Add(2500*time.Millisecond).Truncate(time.Second)))
		assert.True(t, rl.Rate.Reset.Before(time.Now().Add(3500*time.Millisecond)))
		assert.Equal(t, "API rate limit exceeded for user ID 1.", rl.Message)
	})
	t.Run("secondary", func(t *testing.T) {
		s.Inject(Fault{Times: 1, RateLimit: RateLimitSecondary, Wait: 1500 * time.Millisecond})
		_, err := listRunners(client(t, s, testToken))
		var abuse *github.AbuseRateLimitError
		require.ErrorAs(t, err, &abuse)
		require.NotNil(t, abuse.RetryAfter)
		assert.Equal(t, 2*time.Second, *abuse.RetryAfter, "whole seconds, rounded up")
	})
	t.Run("429", func(t *testing.T) {
		s.Inject(Fault{Times: 1, RateLimit: RateLimit429})
		resp, err := listRunners(client(t, s, testToken))
		assertStatus(t, err, http.StatusTooManyRequests)
		assert.Equal(t, "1", resp.Header.Get("Retry-After"), "at least 1")
	})
}

func TestHangUntilClientGivesUpOrClose(t *testing.T) {
	s := start(t, Config{})
	s.Inject(Fault{Path: "/registration-token", Hang: true})
	gh := client(t, s, testToken)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err := gh.Actions.CreateRegistrationToken(ctx, "acme", "app")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, _, err = gh.Actions.ListRunners(context.Background(), "acme", "app", nil)
	require.NoError(t, err, "another path is answered")

	errc := make(chan error, 1)
	go func() {
		_, _, err := gh.Actions.CreateRegistrationToken(context.Background(), "acme", "app")
		errc <- err
	}()
	await(t, s, "the second hanging call", func() bool {
		n := 0
		for _, c := range s.Calls() {
			if c.Method == http.MethodPost {
				n++
			}
		}
		return n == 2
	})
	s.Close()
	select {
	case err := <-errc:
		assert.Error(t, err)
	case <-time.After(wait):
		t.Fatal("Close did not release the hanging request")
	}
	calls := s.Calls()
	require.Len(t, calls, 3)
	assert.Equal(t, Call{Method: "POST", Path: "/repos/acme/app/actions/runners/registration-token", At: calls[0].At}, calls[0], "never answered")
	assert.Equal(t, http.StatusOK, calls[1].Status)
}

func TestLatencyAndCalls(t *testing.T) {
	const latency = 300 * time.Millisecond
	s := start(t, Config{Latency: latency})
	gh := client(t, s, testToken)
	began := time.Now()
	_, _, err := gh.Actions.ListRunners(context.Background(), "acme", "app", &github.ListRunnersOptions{Name: github.Ptr("spot-1")})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(began), latency)

	began = time.Now()
	resp, err := http.Post(s.URL()+"/_fake/register", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Less(t, time.Since(began), latency, "the runner's endpoints take no latency")
	http.DefaultClient.CloseIdleConnections()

	calls := s.Calls()
	require.Len(t, calls, 1, "the runner's endpoints are not recorded")
	assert.Equal(t, "GET", calls[0].Method)
	assert.Equal(t, "/repos/acme/app/actions/runners", calls[0].Path)
	assert.Equal(t, "name=spot-1", calls[0].Query)
	assert.Equal(t, http.StatusOK, calls[0].Status)
	assert.WithinDuration(t, began, calls[0].At, time.Minute)
}

func TestAwait(t *testing.T) {
	s := start(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := s.Await(ctx, func() bool { return false })
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	go s.AddRun("acme/app", RunSpec{})
	await(t, s, "the run", func() bool { _, ok := s.Run(9_000_000_001); return ok })
}

func TestBadInput(t *testing.T) {
	s := start(t, Config{})
	assert.Zero(t, s.AddRun("acme", RunSpec{}), "not a repository")
	assert.Zero(t, s.AddRunner("a/b/c", RunnerSpec{}))
	run, job := s.AddLostJob("", 1, "x")
	assert.Zero(t, run+job)
	_, ok := s.Runner(12345)
	assert.False(t, ok)
	_, ok = s.Run(12345)
	assert.False(t, ok)
	s.LoseRunner(12345)
	s.Inject(Fault{Times: 1, Status: 42})
	_, _, err := client(t, s, testToken).Actions.ListRunners(context.Background(), "acme", "app", nil)
	assertStatus(t, err, http.StatusInternalServerError)
	assert.Error(t, WriteRunnerDir(t.TempDir(), ""))
	assert.Equal(t, 2, Main("nonsense", nil))
}

func TestRateNeverRunsOutByItself(t *testing.T) {
	s := start(t, Config{})
	s.mu.Lock()
	s.rate.used = rateLimit - 3
	s.mu.Unlock()
	gh := client(t, s, testToken)
	for range 5 {
		_, resp, err := gh.Actions.ListRunners(context.Background(), "acme", "app", nil)
		require.NoError(t, err)
		assert.Positive(t, resp.Rate.Remaining)
	}
}

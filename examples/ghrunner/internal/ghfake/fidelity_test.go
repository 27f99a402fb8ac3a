package ghfake

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forceCancel sends POST .../runs/{id}/force-cancel, which go-github has
// no method for, and returns its error (an *github.AcceptedError on 202).
func forceCancel(t *testing.T, gh *github.Client, repo string, id int64) error {
	t.Helper()
	req, err := gh.NewRequest(http.MethodPost, "repos/"+repo+"/actions/runs/"+itoa(id)+"/force-cancel", nil)
	require.NoError(t, err)
	_, err = gh.Do(context.Background(), req, nil)
	return err
}

// requireAccepted requires err to be go-github's report of a 202.
func requireAccepted(t *testing.T, err error) {
	t.Helper()
	var accepted *github.AcceptedError
	require.ErrorAs(t, err, &accepted)
}

func TestForceCancel(t *testing.T) {
	s := start(t, Config{})
	gh := client(t, s, testToken)
	dir, id := configureRunner(t, s, "acme/app", "spot-1")
	l := startListener(t, dir)
	run := s.AddRun("acme/app", RunSpec{Jobs: []JobSpec{{Name: "build"}, {Name: "gpu", Labels: []string{"gpu"}}}})
	await(t, s, "the job on the runner", jobOn(s, run, id))
	l.out.await(t, "Running job: build")

	requireAccepted(t, forceCancel(t, gh, "acme/app", run))
	got, _ := s.Run(run)
	assert.Equal(t, StatusCompleted, got.Status, "at once, without waiting for the runner")
	assert.Equal(t, ConclusionCancelled, got.Conclusion)
	assert.True(t, got.ForceCancelled)
	assert.True(t, got.CancelRequested)
	for _, j := range got.Jobs {
		assert.Equal(t, []string{StatusCompleted, ConclusionCancelled}, []string{j.Status, j.Conclusion}, j.Name)
	}
	r, _ := s.Runner(id)
	assert.False(t, r.Busy, "its runner is free")
	l.out.await(t, "Z: Job build completed with result: Canceled")

	assertStatus(t, forceCancel(t, gh, "acme/app", run), http.StatusConflict)
	assertStatus(t, forceCancel(t, gh, "acme/lib", run), http.StatusNotFound)
	next := s.AddRun("acme/app", RunSpec{Jobs: []JobSpec{{Name: "next", Duration: time.Millisecond}}})
	await(t, s, "the next run, on the same runner", runDone(s, next))
	got, _ = s.Run(next)
	assert.Equal(t, []any{id, ConclusionSuccess}, []any{got.Jobs[0].RunnerID, got.Jobs[0].Conclusion})
}

func TestForceCancelWithoutItsRunner(t *testing.T) {
	s := start(t, Config{})
	gh := client(t, s, testToken)
	dir, id := configureRunner(t, s, "acme/app", "spot-1")
	run := s.AddRun("acme/app", RunSpec{})
	vanishMidJob(t, s, dir, id)
	_, err := gh.Actions.CancelWorkflowRunByID(context.Background(), "acme", "app", run)
	requireAccepted(t, err)
	got, _ := s.Run(run)
	assert.Equal(t, StatusInProgress, got.Status, "a cancel waits for the runner")

	requireAccepted(t, forceCancel(t, gh, "acme/app", run))
	got, _ = s.Run(run)
	assert.Equal(t, []string{StatusCompleted, ConclusionCancelled}, []string{got.Status, got.Conclusion})
	assert.Equal(t, ConclusionCancelled, got.Jobs[0].Conclusion)
	assert.Empty(t, got.Jobs[0].Annotations)
	r, _ := s.Runner(id)
	assert.False(t, r.Busy || r.Online)
}

// A listener whose connection dropped mid-job, and whose job ended
// meanwhile without it, is told to stop the job when it reconnects, and
// takes the next one.
func TestListenerReconnectsAfterItsJobEnded(t *testing.T) {
	s := start(t, Config{})
	dir, id := configureRunner(t, s, "acme/app", "spot-1")
	l := startListener(t, dir)
	run := s.AddRun("acme/app", RunSpec{})
	await(t, s, "the job on the runner", jobOn(s, run, id))
	l.out.await(t, "Running job: build")
	s.LoseRunner(id) // ends its connection too
	l.out.await(t, "Z: Job build completed with result: Failed")
	next := s.AddRun("acme/app", RunSpec{Jobs: []JobSpec{{Name: "next", Duration: time.Millisecond}}})
	await(t, s, "the next run", runDone(s, next))
	got, _ := s.Run(next)
	assert.Equal(t, id, got.Jobs[0].RunnerID)
}

func TestListenerSessionConflict(t *testing.T) {
	s := start(t, Config{})
	dir, id := configureRunner(t, s, "acme/app", "spot-1")
	startListener(t, dir).out.await(t, "Listening for Jobs")
	var out bytes.Buffer
	assert.Equal(t, exitSessionConflict, listen(context.Background(), dir, &out))
	assert.Contains(t, out.String(), "Z: Runner connect error: A session for this runner already exists. Retrying until reconnected.\n")
	assert.True(t, strings.HasSuffix(out.String(), "\nFailed to create session. A session for this runner already exists.\n"), out.String())
	r, _ := s.Runner(id)
	assert.True(t, r.Online && r.Connected, "the first listener keeps its session")
}

func TestOrgReposSorted(t *testing.T) {
	s := start(t, Config{})
	gh := client(t, s, testToken)
	for _, repo := range []string{"acme/b", "acme/A", "acme/c", "other/x"} {
		s.AddRun(repo, RunSpec{})
	}
	s.AddRun("acme/b", RunSpec{Jobs: []JobSpec{{Duration: time.Millisecond}}}) // runs are no pushes
	s.Push("acme/A")
	s.Push("acme/new") // a repository without runs
	s.Push("acme")     // not a repository: nothing
	list := func(sort, dir string, page int) ([]string, *github.Response) {
		t.Helper()
		repos, resp, err := gh.Repositories.ListByOrg(context.Background(), "acme", &github.RepositoryListByOrgOptions{
			Sort: sort, Direction: dir, ListOptions: github.ListOptions{PerPage: 3, Page: page},
		})
		require.NoError(t, err)
		var names []string
		for _, r := range repos {
			names = append(names, r.GetName())
		}
		return names, resp
	}
	for _, tc := range []struct {
		sort, dir string
		want      []string
	}{
		{"", "", []string{"new", "c", "A"}},
		{"created", "asc", []string{"b", "A", "c"}},
		{"pushed", "", []string{"new", "A", "c"}},
		{"pushed", "asc", []string{"b", "c", "A"}},
		{"updated", "", []string{"new", "A", "c"}},
		{"full_name", "", []string{"A", "b", "c"}},
		{"full_name", "desc", []string{"new", "c", "b"}},
	} {
		got, resp := list(tc.sort, tc.dir, 1)
		assert.Equal(t, tc.want, got, "sort=%s direction=%s", tc.sort, tc.dir)
		assert.Equal(t, []int{2, 2}, []int{resp.NextPage, resp.LastPage})
	}
	got, resp := list("pushed", "desc", 2)
	assert.Equal(t, []string{"b"}, got)
	assert.Equal(t, []int{0, 1, 1}, []int{resp.NextPage, resp.PrevPage, resp.FirstPage})

	repos, _, err := gh.Repositories.ListByOrg(context.Background(), "acme", &github.RepositoryListByOrgOptions{Sort: "full_name"})
	require.NoError(t, err)
	a, b := repos[0], repos[1]
	assert.Equal(t, b.GetCreatedAt(), b.GetPushedAt(), "pushed when first seen")
	assert.Equal(t, b.GetCreatedAt(), b.GetUpdatedAt())
	assert.False(t, a.GetPushedAt().Before(a.GetCreatedAt().Time))
	assert.False(t, a.GetPushedAt().IsZero())
	_, _, err = gh.Repositories.ListByOrg(context.Background(), "acme", &github.RepositoryListByOrgOptions{Sort: "stars"})
	assertStatus(t, err, http.StatusUnprocessableEntity)
}

package registry_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

// The registry holds at most MaxJobs jobs: the oldest finished one makes
// room for a new one, and when none is finished enqueueing fails with 429.
func TestMaxJobs(t *testing.T) {
	f := openFixtureWith(t, filepath.Join(t.TempDir(), "registry.json"), &registry.Config{MaxJobs: 2}, nil)
	r := f.register(t, "a")
	f.enqueue(t, "one")
	f.enqueue(t, "two")
	status, _, body := f.call(t, "admin", "POST", "/jobs", `{"command":"three"}`)
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Contains(t, string(body), "2 jobs are queued or running")

	f.claim(t, r.ID)
	_, err := f.as(r.ID).Report(t.Context(), "j-1", registry.Result{RunnerID: r.ID, State: registry.JobSucceeded, ExitCode: exit(0)})
	require.NoError(t, err)
	assert.Equal(t, "j-3", f.enqueue(t, "three").ID, "ids are never reused")
	_, err = f.c.Job(t.Context(), "j-1")
	assert.ErrorIs(t, err, registry.ErrNotFound, "the oldest finished job is forgotten")
	assert.Len(t, f.snapshot(t).Jobs, 2)
	assert.Equal(t, f.snapshot(t), reopen(t, f).snapshot(t))
}

func TestMaxRunners(t *testing.T) {
	f := openFixtureWith(t, filepath.Join(t.TempDir(), "registry.json"), &registry.Config{MaxRunners: 3}, nil)
	for i := range 3 {
		f.register(t, fmt.Sprint(i))
	}
	status, _, body := f.call(t, "join", "POST", "/runners", `{"name":"one too many"}`)
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Contains(t, string(body), "3 runners are registered")
	require.NoError(t, f.as("r-1").Remove(t.Context(), "r-1"))
	f.register(t, "room again")
}

// Strangers, who hold neither the join token nor the admin token, cannot
// register, so they cannot use up MaxRunners: a runner with the join
// token still gets in.
func TestStrangersCannotFillTheRegistry(t *testing.T) {
	f := openFixtureWith(t, filepath.Join(t.TempDir(), "registry.json"), &registry.Config{MaxRunners: 3}, nil)
	refused := 0
	for i := range 10 {
		if status, _, _ := f.call(t, "", "POST", "/runners", fmt.Sprintf(`{"name":"stranger-%d"}`, i)); status == http.StatusUnauthorized {
			refused++
		}
	}
	assert.Equal(t, 10, refused, "registrations without a token refused")
	assert.Empty(t, f.snapshot(t).Runners)
	f.register(t, "legitimate")
}

// Commands and outputs bounded by configuration; the request body limit
// grows with them.
func TestConfiguredSizeLimits(t *testing.T) {
	f := openFixtureWith(t, filepath.Join(t.TempDir(), "registry.json"), &registry.Config{MaxCommand: 10, MaxOutput: 3 << 20}, nil)
	r := f.register(t, "a")
	status, _, _ := f.call(t, "admin", "POST", "/jobs", `{"command":"0123456789"}`)
	assert.Equal(t, http.StatusCreated, status)
	status, _, body := f.call(t, "admin", "POST", "/jobs", `{"command":"0123456789a"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status)
	assert.Contains(t, string(body), "command is 11 bytes, longer than 10")

	f.claim(t, r.ID)
	big := make([]byte, 2<<20)
	for i := range big {
		big[i] = 'x'
	}
	j, err := f.as(r.ID).Report(t.Context(), "j-1", registry.Result{RunnerID: r.ID, State: registry.JobSucceeded, Output: string(big)})
	require.NoError(t, err)
	assert.Len(t, j.Output, registry.OutputLimit)
}

// A runner's reason goes into the job's History for good: reasons are cut
// to 1 KiB and a job keeps its last 32 attempts, so the state file stays
// small whatever runners send.
func TestReasonsAndHistoryAreBounded(t *testing.T) {
	f := newFixture(t)
	f.register(t, "r")
	f.enqueue(t, "make")
	reason := strings.Repeat("x", 900<<10)
	for i := range 40 {
		require.Equal(t, "j-1", f.claim(t, "r-1").ID, "round %d", i)
		_, err := f.as("r-1").Report(t.Context(), "j-1", registry.Result{RunnerID: "r-1", State: registry.JobInterrupted, Reason: reason})
		require.NoError(t, err)
	}
	fi, err := os.Stat(f.path)
	require.NoError(t, err)
	assert.Less(t, fi.Size(), int64(64<<10), "state file after 40 reports of 900 KB reasons")
	j := f.job(t, "j-1")
	assert.Len(t, j.History, 32)
	assert.LessOrEqual(t, len(j.History[0].Reason), 1<<10+len("…"))
}

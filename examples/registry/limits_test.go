package registry_test

import (
	"fmt"
	"net/http"
	"path/filepath"
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
	status, _, body := f.call(t, "", "POST", "/runners", `{"name":"one too many"}`)
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Contains(t, string(body), "3 runners are registered")
	require.NoError(t, f.as("r-1").Remove(t.Context(), "r-1"))
	f.register(t, "room again")
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

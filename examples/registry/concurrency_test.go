package registry_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

func TestConcurrentClaims(t *testing.T) {
	const runners, jobs = 8, 40
	f := newFixture(t)
	for i := range jobs {
		f.enqueue(t, fmt.Sprintf("echo %d", i))
	}
	var ids []string
	for i := range runners {
		ids = append(ids, f.register(t, fmt.Sprintf("runner-%d", i)).ID)
	}

	var (
		mu      sync.Mutex
		claimed = map[string][]string{} // job id → runners that claimed it
		wg      sync.WaitGroup
		errs    = make(chan error, runners)
	)
	for _, id := range ids {
		wg.Go(func() {
			for {
				j, err := f.c.Claim(t.Context(), id)
				if err != nil {
					errs <- err
					return
				}
				if j == nil {
					return
				}
				mu.Lock()
				claimed[j.ID] = append(claimed[j.ID], id)
				mu.Unlock()
				if _, err := f.c.Report(t.Context(), j.ID, registry.Result{RunnerID: id, State: registry.JobSucceeded, ExitCode: exit(0)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	assert.Len(t, claimed, jobs)
	for job, by := range claimed {
		assert.Len(t, by, 1, "job %s claimed by %v", job, by)
	}
	all, err := f.c.Jobs(t.Context())
	require.NoError(t, err)
	for _, j := range all {
		assert.Equal(t, registry.JobSucceeded, j.State, j.ID)
		assert.Equal(t, 1, j.Attempts, j.ID)
		require.Len(t, j.History, 1)
		assert.Equal(t, claimed[j.ID][0], j.History[0].RunnerID)
	}
	assert.Equal(t, f.snapshot(t), openFixture(t, f.path).snapshot(t), "disk agrees after the rush")
}

func TestConcurrentRegisterSameName(t *testing.T) {
	const n = 16
	f := newFixture(t)
	var (
		wg        sync.WaitGroup
		ok, taken = make(chan registry.Runner, n), make(chan error, n)
	)
	for range n {
		wg.Go(func() {
			r, err := f.c.Register(t.Context(), "same", nil)
			if err != nil {
				taken <- err
				return
			}
			ok <- r
		})
	}
	wg.Wait()
	close(ok)
	close(taken)
	assert.Len(t, ok, 1)
	for err := range taken {
		assert.ErrorIs(t, err, registry.ErrConflict)
	}
}

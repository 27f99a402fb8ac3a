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
				j, err := f.as(id).Claim(t.Context(), id)
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
				if _, err := f.as(id).Report(t.Context(), j.ID, registry.Result{RunnerID: id, State: registry.JobSucceeded, ExitCode: exit(0)}); err != nil {
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

// Names are not unique: a token, not a name, identifies a registration.
// Each of many hosts registering under one name gets its own id and token.
func TestConcurrentRegisterSameName(t *testing.T) {
	const n = 16
	f := newFixture(t)
	var (
		wg   sync.WaitGroup
		ok   = make(chan registry.Registration, n)
		errs = make(chan error, n)
	)
	for range n {
		wg.Go(func() {
			r, err := f.c.WithToken(joinToken).Register(t.Context(), "same", nil)
			if err != nil {
				errs <- err
				return
			}
			ok <- r
		})
	}
	wg.Wait()
	close(ok)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	ids, tokens := map[string]bool{}, map[string]bool{}
	for r := range ok {
		ids[r.ID], tokens[r.Token] = true, true
	}
	assert.Len(t, ids, n)
	assert.Len(t, tokens, n)
}

package registry_test

import (
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

// clock is a time that the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const lease = time.Minute

// leaseFixture is a registry with a one-minute lease on a clock the test
// moves: runner r-1 "gone" runs job j-1, runner r-2 "alive" runs nothing.
func leaseFixture(t *testing.T) (*fixture, *clock) {
	clk := newClock()
	f := openFixtureWith(t, filepath.Join(t.TempDir(), "registry.json"), &registry.Config{Lease: lease}, clk.now)
	f.register(t, "gone")
	f.register(t, "alive")
	f.enqueue(t, "make")
	require.Equal(t, "j-1", f.claim(t, "r-1").ID)
	return f, clk
}

// alive makes runner r-2 send a heartbeat every 20 s (a third of the
// lease) for d.
func alive(t *testing.T, f *fixture, clk *clock, d time.Duration) {
	t.Helper()
	for step := 20 * time.Second; d > 0; d -= step {
		clk.advance(min(step, d))
		require.NoError(t, f.as("r-2").Heartbeat(t.Context(), "r-2"))
	}
}

// A runner gone for good (a spot instance replaced under another name)
// never unregisters: when its lease lapses the registry removes it and
// re-queues its job, which another runner then takes.
func TestLeaseLapseRequeuesTheJob(t *testing.T) {
	f, clk := leaseFixture(t)
	alive(t, f, clk, lease-time.Second)
	assert.Len(t, f.snapshot(t).Runners, 2, "not yet")

	alive(t, f, clk, time.Second)
	rs := f.snapshot(t).Runners
	require.Len(t, rs, 1)
	assert.Equal(t, "r-2", rs[0].ID)
	j := f.job(t, "j-1")
	assert.Equal(t, registry.JobQueued, j.State)
	require.Len(t, j.History, 1)
	assert.Equal(t, "the runner's lease lapsed while it ran the job", j.History[0].Reason)

	again := f.claim(t, "r-2")
	require.NotNil(t, again)
	assert.Equal(t, "j-1", again.ID)
	assert.Equal(t, 2, again.Attempts)

	// The lapsed runner learns that it is gone: 404, so it registers again.
	_, err := f.as("r-1").Claim(t.Context(), "r-1")
	assert.ErrorIs(t, err, registry.ErrNotFound)
	assert.ErrorIs(t, f.as("r-1").Heartbeat(t.Context(), "r-1"), registry.ErrNotFound)

	// And it is gone from disk too.
	assert.Len(t, reopen(t, f).snapshot(t).Runners, 1)
}

// Each request of a runner renews its lease: heartbeats while it runs a
// job, claims while it is idle, its report.
func TestLeaseIsRenewed(t *testing.T) {
	tests := []struct {
		name  string
		renew func(t *testing.T, f *fixture)
	}{
		{"heartbeat", func(t *testing.T, f *fixture) { require.NoError(t, f.as("r-1").Heartbeat(t.Context(), "r-1")) }},
		{"claim, even refused", func(t *testing.T, f *fixture) {
			_, err := f.as("r-1").Claim(t.Context(), "r-1")
			require.ErrorIs(t, err, registry.ErrConflict)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, clk := leaseFixture(t)
			for range 10 {
				alive(t, f, clk, lease/2)
				tt.renew(t, f)
			}
			assert.Len(t, f.snapshot(t).Runners, 2)
			assert.Equal(t, registry.JobRunning, f.job(t, "j-1").State)
		})
	}
}

// The registry cannot tell a dead runner from one that cannot reach it: a
// registry that was hung, or restarted, lets no lease lapse for the time
// it heard nobody.
func TestSilenceLetsNoLeaseLapse(t *testing.T) {
	t.Run("hung", func(t *testing.T) {
		f, clk := leaseFixture(t)
		clk.advance(10 * lease) // SIGSTOP, say
		assert.Len(t, f.snapshot(t).Runners, 2, "every lease starts again")
		alive(t, f, clk, lease)
		assert.Len(t, f.snapshot(t).Runners, 1, "then r-1's lapses, r-2's does not")
	})
	t.Run("restarted", func(t *testing.T) {
		f, clk := leaseFixture(t)
		alive(t, f, clk, lease-time.Second)
		g := openFixtureWith(t, f.path, &registry.Config{Lease: lease}, clk.now)
		maps.Copy(g.tokens, f.tokens)
		alive(t, g, clk, lease-time.Second)
		assert.Len(t, g.snapshot(t).Runners, 2, "a restart gives every runner a new lease")
		alive(t, g, clk, time.Second)
		assert.Len(t, g.snapshot(t).Runners, 1)
	})
}

// A failed save of the expiry is tried again at the next request; in the
// meantime requests are served, and nothing changes.
func TestLeaseExpiryWhenTheSaveFails(t *testing.T) {
	clk := newClock()
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(dir, 0o700))
	f := openFixtureWith(t, filepath.Join(dir, "registry.json"), &registry.Config{Lease: lease}, clk.now)
	f.register(t, "gone")
	f.register(t, "alive")
	alive(t, f, clk, lease-time.Second)

	require.NoError(t, os.RemoveAll(dir))
	clk.advance(time.Second)
	status, _, _ := f.call(t, "", http.MethodGet, "/runners", "")
	require.Equal(t, http.StatusOK, status)
	assert.Len(t, f.snapshot(t).Runners, 2, "the removal could not be saved")

	require.NoError(t, os.Mkdir(dir, 0o700))
	assert.Len(t, f.snapshot(t).Runners, 1)
}

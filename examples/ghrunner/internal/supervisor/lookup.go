//go:build unix

package supervisor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghapi"
	"github.com/termsig/termsig/examples/ghrunner/internal/runner"
	"github.com/termsig/termsig/internal/backoff"
)

// knownJob is the job run.sh took, looked up when run.sh said it started
// it, so that a notice need not spend its deadline on the search (for an
// organisation's runner, two calls per repository and run).
type knownJob struct {
	mu      sync.Mutex
	child   *runner.Process // the run.sh that said it took the job
	started int             // its jobsStarted() then
	job     *ghapi.Job
}

// get returns the job looked up for c's started-th job, if any.
func (k *knownJob) get(c *runner.Process, started int) *ghapi.Job {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.child != c || k.started != started {
		return nil
	}
	return k.job
}

func (k *knownJob) set(c *runner.Process, started int, j *ghapi.Job) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.child, k.started, k.job = c, started, j
}

// lookupTries bounds the tries of one lookup: GitHub may show the job as
// in progress on the runner a moment after the listener has printed it.
const lookupTries = 5

// lookUpJob starts looking up the job run.sh has just said it took, in
// the background; ctx ends the lookup. Nothing waits for it: a notice
// that comes first finds the job itself.
func (s *supervisor) lookUpJob(ctx context.Context, wg *sync.WaitGroup) {
	c := s.child
	busy, _, _ := c.State()
	started := c.JobsStarted()
	if !busy || (s.lookedUp == c && s.lookedUpN == started) {
		return
	}
	s.lookedUp, s.lookedUpN = c, started
	wg.Go(func() {
		b := backoff.Backoff{Base: time.Second, Max: 4 * time.Second, Jitter: true}
		var err error
		for range lookupTries {
			var j *ghapi.Job
			j, err = s.api.FindJob(ctx, s.reg.ID, true)
			if ctx.Err() != nil {
				return
			}
			if j != nil {
				s.known.set(c, started, j)
				s.log.Info("ghrunner: the runner runs", "job", j)
				return
			}
			if !errors.Is(err, ghapi.ErrNoJob) {
				break // only a job GitHub does not show yet is looked for again
			}
			if !backoff.Sleep(ctx, b.Next()) {
				return
			}
		}
		s.log.Warn("ghrunner: cannot look up the job run.sh took; a notice will", "err", err)
	})
}

//go:build unix

package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/termsig/termsig/internal/backoff"
)

// knownJob is the job run.sh took, looked up when run.sh said it started
// it, so that a notice need not spend its deadline on the search (for an
// organisation's runner, two calls per repository and run).
type knownJob struct {
	mu      sync.Mutex
	child   *child // the run.sh that said it took the job
	started int    // its jobsStarted() then
	job     *jobRef
}

// get returns the job looked up for c's started-th job, if any.
func (k *knownJob) get(c *child, started int) *jobRef {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.child != c || k.started != started {
		return nil
	}
	return k.job
}

func (k *knownJob) set(c *child, started int, j *jobRef) {
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
func (g *ghrunner) lookUpJob(ctx context.Context, wg *sync.WaitGroup) {
	c := g.child
	busy, _, _ := c.state()
	started := c.jobsStarted()
	if !busy || (g.lookedUp == c && g.lookedUpN == started) {
		return
	}
	g.lookedUp, g.lookedUpN = c, started
	wg.Go(func() {
		b := backoff.Backoff{Base: time.Second, Max: 4 * time.Second, Jitter: true}
		var err error
		for range lookupTries {
			var j *jobRef
			j, err = g.api.findJob(ctx, g.reg.ID, true)
			if ctx.Err() != nil {
				return
			}
			if j != nil {
				g.known.set(c, started, j)
				g.log.Info("ghrunner: the runner runs", "job", j)
				return
			}
			if !errors.Is(err, errNoJob) {
				break // only a job GitHub does not show yet is looked for again
			}
			if !backoff.Sleep(ctx, b.Next()) {
				return
			}
		}
		g.log.Warn("ghrunner: cannot look up the job run.sh took; a notice will", "err", err)
	})
}

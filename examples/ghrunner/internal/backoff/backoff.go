// Package backoff is the waiting ghrunner does between tries: exponential
// backoff, and sleeps that end when ctx does.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// A Backoff is exponential backoff: the first wait is Base, and each next
// one doubles, up to Max (or Base, if Max is smaller). With Jitter, each
// wait is drawn at random from the upper half of the current step, so that
// many hosts that failed together do not retry together. The zero value
// waits zero; it is not safe for concurrent use.
type Backoff struct {
	Base, Max time.Duration
	Jitter    bool

	cur time.Duration
}

// Next returns the next wait.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.Base
	} else {
		b.cur = min(2*b.cur, max(b.Max, b.Base))
	}
	if !b.Jitter || b.cur <= 1 {
		return b.cur
	}
	half := b.cur / 2
	return half + rand.N(b.cur-half+1)
}

// Sleep waits for d or until ctx is done, and reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Package watchtest runs one source under a Notifier for the source
// packages' own tests, and tells them what its Watch returned.
package watchtest

import (
	"context"
	"testing"
	"time"

	"github.com/termsig/termsig"
)

// Wait is how long Returned waits before failing the test.
const Wait = 5 * time.Second

// Watch runs src under a Notifier of cfg, and returns it with a channel
// that gets what src's Watch returned. The Notifier stops when the test
// ends.
func Watch(t testing.TB, cfg termsig.Config, src termsig.Source) (*termsig.Notifier, <-chan error) {
	t.Helper()
	w := returned{src: src, err: make(chan error, 1)}
	n := cfg.New(w)
	t.Cleanup(n.Stop)
	return n, w.err
}

// Returned waits for what Watch returned.
func Returned(t testing.TB, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(Wait):
		t.Fatal("Watch did not return")
	}
	return nil
}

// returned is src, with what its Watch returned sent on err.
type returned struct {
	src termsig.Source
	err chan error
}

func (s returned) Name() string { return s.src.Name() }

func (s returned) Traits() termsig.Traits {
	if d, ok := s.src.(termsig.Describer); ok {
		return d.Traits()
	}
	return termsig.Traits{}
}

func (s returned) Watch(ctx context.Context, r *termsig.Run) error {
	err := s.src.Watch(ctx, r)
	s.err <- err
	return err
}

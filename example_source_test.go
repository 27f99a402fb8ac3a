package termsig_test

import (
	"context"
	"testing"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/termsigtest"
)

// Flag is a source that sends one Terminate when its channel is closed,
// such as the "go away" of a supervisor of your own.
type Flag struct{ C <-chan struct{} }

func (f Flag) Name() string { return "flag" }

func (f Flag) Watch(ctx context.Context, r *termsig.Run) error {
	r.Ready() // its first look: nothing to set up
	select {
	case <-f.C:
		err := r.Send(ctx, termsig.Notice{Kind: termsig.Terminate, Event: "flag", Reason: "flag closed"})
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	<-ctx.Done()
	return ctx.Err()
}

func TestFlagKeepsSourceContract(t *testing.T) {
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		c := make(chan struct{})
		return Flag{C: c}, func() { close(c) }
	})
}

package termsig_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/termsigtest"
)

// plain is a source that cannot release: it only sends.
type plain struct{ name string }

func (p plain) Name() string { return p.name }
func (p plain) Watch(ctx context.Context, r *termsig.Run) error {
	r.Ready()
	<-ctx.Done()
	return nil
}

// failing is a Releaser whose Release fails.
type failing struct{ plain }

func (failing) Release(context.Context, termsig.Notice) error { return errors.New("lock gone") }

func TestReleaseFindsTheNoticesSource(t *testing.T) {
	a, b := termsigtest.NewFake("a"), termsigtest.NewFake("b")
	n := termsig.New(a, b, plain{"sig"})
	defer n.Stop()
	b.Send(termsig.Notice{Kind: termsig.Terminate, Event: "shutdown/poweroff"})
	nt := receive(t, n.C())

	require.NoError(t, n.Release(context.Background(), nt))
	assert.Empty(t, a.Released())
	require.Len(t, b.Released(), 1)
	assert.Equal(t, "shutdown/poweroff", b.Released()[0].Event)

	// A source that holds nothing: nothing to do, no error.
	assert.NoError(t, n.Release(context.Background(), termsig.Notice{Source: "sig", Kind: termsig.Terminate}))
}

func TestReleaseOfUnknownSource(t *testing.T) {
	n := termsig.New(termsigtest.NewFake("a"))
	defer n.Stop()
	for _, src := range []string{"logind", ""} {
		err := n.Release(context.Background(), termsig.Notice{Source: src, Kind: termsig.Terminate})
		require.ErrorIs(t, err, termsig.ErrUnknownSource)
		assert.Contains(t, err.Error(), `"`+src+`"`)
	}
}

func TestReleaseErrorNamesTheSource(t *testing.T) {
	n := termsig.New(failing{plain{"logind"}})
	defer n.Stop()
	err := n.Release(context.Background(), termsig.Notice{Source: "logind", Kind: termsig.Terminate})
	assert.EqualError(t, err, "termsig: release logind: lock gone")
}

func TestReleaseAfterStop(t *testing.T) {
	f := termsigtest.NewFake("a")
	n := termsig.New(f)
	n.Stop()
	assert.NoError(t, n.Release(context.Background(), termsig.Notice{Source: "a", Kind: termsig.Terminate}))
	assert.Len(t, f.Released(), 1)
}

package termsig_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/termsigtest"
)

func done(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(wait):
		t.Fatal("context not cancelled")
	}
}

func TestNotifyContextCancelsOnImminentNotice(t *testing.T) {
	for _, k := range []termsig.Kind{termsig.Terminate, termsig.Stop, termsig.Hibernate, termsig.Reboot, termsig.Interrupt} {
		t.Run(k.String(), func(t *testing.T) {
			logs := testlog.New()
			f := termsigtest.NewFake("fake")
			ctx, stop := termsig.Config{Logger: logs.Logger()}.NotifyContext(context.Background(), f)
			defer stop()

			// Advice first: it must not cancel, and must be logged.
			f.Send(termsig.Notice{Kind: termsig.Rebalance, Reason: "advice"})
			f.Send(termsig.Notice{Kind: k, Reason: "go away", Deadline: time.Now().Add(time.Minute)})
			done(t, ctx)

			assert.ErrorIs(t, ctx.Err(), context.Canceled)
			n, ok := termsig.Cause(ctx)
			require.True(t, ok)
			assert.Equal(t, k, n.Kind, "the rebalance before it did not cancel")
			assert.Equal(t, "go away", n.Reason)
			assert.Equal(t, "fake", n.Source)
			assert.ErrorContains(t, context.Cause(ctx), "termsig: fake: "+k.String()+" (go away)")
			assert.Equal(t, 1, logs.Count("termsig: notice does not cancel the context"))

			// Derived contexts carry the same cause.
			child, cancel := context.WithTimeout(ctx, time.Hour)
			defer cancel()
			n2, ok := termsig.Cause(child)
			require.True(t, ok)
			assert.Equal(t, n, n2)
		})
	}
}

func TestNotifyContextIgnoresAdvice(t *testing.T) {
	logs := testlog.New()
	f := termsigtest.NewFake("fake")
	ctx, stop := termsig.Config{Logger: logs.Logger()}.NotifyContext(context.Background(), f)
	for _, k := range []termsig.Kind{termsig.Reload, termsig.Rebalance, termsig.Maintenance, termsig.Cleared} {
		f.Send(termsig.Notice{Kind: k})
	}
	logs.WaitFor(t, "termsig: notice does not cancel the context", 4)
	assert.NoError(t, ctx.Err())
	stop()
	assert.ErrorIs(t, ctx.Err(), context.Canceled)
	_, ok := termsig.Cause(ctx)
	assert.False(t, ok, "stop is not a notice")
	stop() // twice is fine
}

func TestNotifyContextParentCancelled(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.Background())
	ctx, stop := termsig.NotifyContext(parent, termsigtest.NewFake("fake"))
	defer stop()
	why := errors.New("shutting down for other reasons")
	cancel(why)
	done(t, ctx)
	_, ok := termsig.Cause(ctx)
	assert.False(t, ok)
	assert.ErrorIs(t, context.Cause(ctx), why)
}

func TestCauseOfOtherContexts(t *testing.T) {
	_, ok := termsig.Cause(context.Background())
	assert.False(t, ok)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, ok = termsig.Cause(ctx)
	assert.False(t, ok)
}

func TestCauseOfARunningDrainContextIsItsNotice(t *testing.T) {
	f := termsigtest.NewFake("f")
	ctx, stop := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.NotifyContext(context.Background(), f)
	defer stop()
	f.Send(termsig.Notice{Kind: termsig.Terminate, Event: "go", Deadline: time.Now().Add(time.Hour)})
	select {
	case <-ctx.Done():
	case <-time.After(wait):
		t.Fatal("the Terminate did not cancel ctx")
	}
	nt, ok := termsig.Cause(ctx)
	require.True(t, ok)
	dctx, cancel := nt.DrainContext(ctx, termsig.Drain{})
	defer cancel()
	require.NoError(t, dctx.Err(), "the drain runs")
	got, ok := termsig.Cause(dctx)
	require.True(t, ok, "a hand-back that asks why it runs gets the notice")
	assert.Equal(t, "go", got.Event)
	child, cancelChild := context.WithCancel(dctx)
	defer cancelChild()
	got, ok = termsig.Cause(child)
	assert.True(t, ok)
	assert.Equal(t, "go", got.Event, "and so does a context derived from it")
	_, ok = termsig.Cause(context.Background())
	assert.False(t, ok)
}

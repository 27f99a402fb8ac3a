//go:build unix

package supervisor

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

func testDrain(end time.Time) *drain {
	s := &supervisor{cfg: Config{StopTimeout: time.Minute, Margin: time.Second}, log: slog.New(slog.DiscardHandler)}
	return &drain{s: s, end: end, spare: 10 * time.Second, moved: make(chan struct{})}
}

// A step's context keeps its deadline; an earlier notice cancels it, and
// the step starts again with a context whose deadline is the new end.
func TestEarlierEndStartsTheStepAgainWithTheNewDeadline(t *testing.T) {
	d := testDrain(time.Now().Add(time.Minute))
	var deadlines []time.Time
	first := make(chan struct{})
	go func() {
		<-first
		d.tighten(termsig.Notice{Kind: termsig.Terminate, Deadline: time.Now().Add(20 * time.Second)})
	}()
	err := d.within(byEnd, func(ctx context.Context) error {
		dl, ok := ctx.Deadline()
		require.True(t, ok)
		deadlines = append(deadlines, dl)
		if len(deadlines) > 1 {
			return nil
		}
		close(first)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Error("the step's context was not cancelled when the end moved")
		}
		again, _ := ctx.Deadline()
		assert.Equal(t, dl, again, "a context's deadline does not change")
		assert.ErrorIs(t, context.Cause(ctx), errEndMoved)
		return context.Cause(ctx)
	})
	require.NoError(t, err)
	require.Len(t, deadlines, 2)
	end, _, _ := d.times()
	assert.Equal(t, end, deadlines[1], "the second try ends at the new end")
	assert.WithinDuration(t, time.Now().Add(19*time.Second), deadlines[1], 2*time.Second, "the notice's deadline minus the margin")
	assert.True(t, deadlines[1].Before(deadlines[0]))
}

// A later notice whose deadline is not earlier leaves the step alone.
func TestLaterEndLeavesTheStepAlone(t *testing.T) {
	d := testDrain(time.Now().Add(20 * time.Second))
	tries := 0
	err := d.within(byKill, func(ctx context.Context) error {
		tries++
		dl, _ := ctx.Deadline()
		d.tighten(termsig.Notice{Kind: termsig.Terminate, Deadline: time.Now().Add(time.Minute)})
		assert.NoError(t, ctx.Err())
		end, spare, _ := d.times()
		assert.Equal(t, end.Add(-spare), dl, "byKill ends the spare before the end")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 1, tries)
}

// A failure that is not the end's move is not tried again.
func TestStepFailingByItsDeadlineIsNotTriedAgain(t *testing.T) {
	d := testDrain(time.Now().Add(-time.Second))
	tries := 0
	err := d.within(byEnd, func(ctx context.Context) error {
		tries++
		<-ctx.Done()
		return context.Cause(ctx)
	})
	assert.ErrorIs(t, err, errDeadline)
	assert.Equal(t, 1, tries)
}

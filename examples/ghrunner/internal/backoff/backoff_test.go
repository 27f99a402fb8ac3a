package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBackoffDoublesUpToMax(t *testing.T) {
	b := Backoff{Base: time.Second, Max: 10 * time.Second}
	var got []time.Duration
	for range 6 {
		got = append(got, b.Next()/time.Second)
	}
	assert.Equal(t, []time.Duration{1, 2, 4, 8, 10, 10}, got)

	// Max below Base: Base.
	b = Backoff{Base: 30 * time.Second, Max: 10 * time.Second}
	assert.Equal(t, 30*time.Second, b.Next())
	assert.Equal(t, 30*time.Second, b.Next())
}

func TestBackoffJitterStaysInTheUpperHalf(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second, Jitter: true}
	step := 100 * time.Millisecond
	for range 8 {
		d := b.Next()
		assert.GreaterOrEqual(t, d, step/2)
		assert.LessOrEqual(t, d, step)
		step = min(2*step, time.Second)
	}
}

func TestSleepEndsWithCtx(t *testing.T) {
	assert.True(t, Sleep(context.Background(), time.Millisecond))
	assert.True(t, Sleep(context.Background(), 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	assert.False(t, Sleep(ctx, time.Hour))
	assert.False(t, Sleep(ctx, 0))
	assert.Less(t, time.Since(start), time.Second)
}

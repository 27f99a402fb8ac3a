package health_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/health"
	"github.com/termsig/termsig/internal/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// source runs script with the Parts of a three-part source, then waits.
type source struct {
	script func(p *health.Parts)
	done   chan struct{}
}

func (s *source) Name() string { return "parts" }
func (s *source) Watch(ctx context.Context, r *termsig.Run) error {
	s.script(health.New(r, 3))
	close(s.done)
	<-ctx.Done()
	return nil
}

func run(t *testing.T, script func(p *health.Parts)) (*termsig.Notifier, *testlog.Recorder) {
	t.Helper()
	logs := testlog.New()
	s := &source{script: script, done: make(chan struct{})}
	n := termsig.Config{Logger: logs.Logger()}.New(s)
	t.Cleanup(n.Stop)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("script did not finish")
	}
	return n, logs
}

func TestOneOutageIsOneChange(t *testing.T) {
	down := errors.New("unreachable: connection refused")
	n, logs := run(t, func(p *health.Parts) {
		for range 5 {
			for i := range 3 {
				p.Set(i, down)
			}
		}
	})
	assert.Equal(t, 1, logs.Count("termsig: source error, retrying"))
	assert.ErrorIs(t, n.Status()[0].Err, down)
	assert.True(t, n.Status()[0].LastHeard.IsZero(), "a failure is not an answer")
}

func TestTheLongestFailureIsReported(t *testing.T) {
	first := errors.New("imds: HTTP 503")
	later := errors.New("imds: spot/instance-action: not JSON")
	n, logs := run(t, func(p *health.Parts) {
		p.Set(0, first)
		p.Set(1, later)
		p.Set(0, first)
		p.Set(1, later)
	})
	assert.Equal(t, 1, logs.Count("termsig: source error, retrying"), "part 1 failing too is no change")
	assert.Equal(t, first, n.Status()[0].Err)
}

func TestRecoveryOfOnePartShowsTheOther(t *testing.T) {
	a, b := errors.New("a broken"), errors.New("b broken")
	n, logs := run(t, func(p *health.Parts) {
		p.Set(0, a)
		p.Set(1, b)
		p.Set(0, nil) // a recovers: b still fails
	})
	assert.Equal(t, b, n.Status()[0].Err)
	assert.Equal(t, 2, logs.Count("termsig: source error, retrying"))
	assert.False(t, n.Status()[0].LastHeard.IsZero(), "part 0 answered")
}

func TestHealthyAgain(t *testing.T) {
	n, logs := run(t, func(p *health.Parts) {
		p.Set(2, errors.New("gone"))
		p.Set(2, nil)
		p.Set(2, nil)
	})
	assert.NoError(t, n.Status()[0].Err)
	assert.Equal(t, 1, logs.Count("termsig: source healthy again"))
}

func TestReadyOnceEveryPartLooked(t *testing.T) {
	gate := make(chan struct{})
	looked := make(chan struct{})
	logs := testlog.New()
	s := &source{done: make(chan struct{}), script: func(p *health.Parts) {
		p.Looked(0)
		p.Looked(0) // again: nothing
		p.Looked(2)
		close(looked)
		<-gate
		p.Looked(1)
	}}
	n := termsig.Config{Logger: logs.Logger()}.New(s)
	defer n.Stop()
	<-looked
	select {
	case <-n.Ready():
		t.Fatal("ready before part 1 looked")
	default:
	}
	close(gate)
	select {
	case <-n.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("not ready after every part looked")
	}
}

package sources_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/signal"
	"github.com/termsig/termsig/sources"
	"github.com/termsig/termsig/termsigtest"
)

// quiet is the Logger of the sources under test.
var quiet = slog.New(slog.DiscardHandler)

// firstLook runs FirstLook of one source, bounded by timeout.
func firstLook(t *testing.T, timeout time.Duration, src termsig.Source) sources.Look {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	looks := sources.FirstLook(ctx, src)
	require.Len(t, looks, 1)
	assert.Equal(t, src.Name(), looks[0].Name)
	return looks[0]
}

func TestFirstLookOfAServiceThatAnswersIsReady(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	l := firstLook(t, 10*time.Second, imds.New(imds.Config{Endpoint: srv.URL, Logger: quiet}))
	assert.True(t, l.Ready)
	assert.Equal(t, termsig.StateRunning, l.State)
	assert.NoError(t, l.Err)
	assert.Positive(t, l.Took)
	assert.Empty(t, l.Notices)
	assert.Zero(t, srv.InFlight(), "the source is stopped when FirstLook returns")
}

func TestFirstLookKeepsTheNoticesItFound(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	l := firstLook(t, 10*time.Second, imds.New(imds.Config{Endpoint: srv.URL, Logger: quiet}))
	assert.True(t, l.Ready)
	require.Len(t, l.Notices, 1)
	assert.Equal(t, termsig.Terminate, l.Notices[0].Kind)
	assert.Equal(t, "imds", l.Notices[0].Source)
}

// More notices than a Notifier's buffer holds before the first look is
// over: FirstLook takes them as they come, so that the source is not held
// back, and keeps them all.
func TestFirstLookTakesMoreNoticesThanTheBufferHolds(t *testing.T) {
	f := termsigtest.NewFake("fake")
	f.HoldReady()
	const many = 3 * termsig.DefaultBuffer
	for i := range many {
		f.Send(termsig.Notice{Kind: termsig.Reload, Event: fmt.Sprint(i)})
	}
	f.SetReady() // after the notices
	l := firstLook(t, 10*time.Second, f)
	assert.True(t, l.Ready)
	assert.Len(t, l.Notices, many)
}

func TestFirstLookOfAServiceThatFailsHasItsError(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	srv.Inject(termsigtest.Fault{Status: 500})
	l := firstLook(t, 10*time.Second, imds.New(imds.Config{Endpoint: srv.URL, Logger: quiet}))
	assert.True(t, l.Ready, "a failure is a first look")
	assert.Equal(t, termsig.StateRunning, l.State, "the source retries")
	assert.ErrorContains(t, l.Err, "500")
}

func TestFirstLookOfAClosedPortHasItsError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	l := firstLook(t, 10*time.Second, azure.New(azure.Config{Endpoint: "http://" + addr, Logger: quiet}))
	assert.True(t, l.Ready)
	assert.Equal(t, termsig.StateRunning, l.State)
	assert.ErrorContains(t, l.Err, "refused")
}

func TestFirstLookThatHangsEndsWithTheContext(t *testing.T) {
	srv := gcemetatest.NewServer()
	defer srv.Close()
	srv.Inject(termsigtest.Fault{Hang: true})
	const timeout = 200 * time.Millisecond
	start := time.Now()
	l := firstLook(t, timeout, gcemeta.New(gcemeta.Config{Host: srv.Host(), Logger: quiet}))
	assert.False(t, l.Ready)
	assert.Equal(t, termsig.StateRunning, l.State)
	assert.InDelta(t, timeout, l.Took, float64(timeout/2), "from the start of the source, a moment after ctx's clock started")
	assert.Less(t, time.Since(start), gcemeta.DefaultRequestTimeout, "FirstLook returned with the context, not the request timeout")
}

func TestFirstLookOfAMisconfiguredSourceFailsWithTheMistake(t *testing.T) {
	src := imds.New(imds.Config{Endpoint: "169.254.169.254", Logger: quiet})
	l := firstLook(t, 10*time.Second, src)
	assert.True(t, l.Ready)
	assert.Equal(t, termsig.StateFailed, l.State)
	assert.Equal(t, src.Available(), l.Err)
	assert.NotErrorIs(t, l.Err, termsig.ErrUnavailable)
}

func TestFirstLookOfASourceThatDoesNotApplyIsUnavailable(t *testing.T) {
	clean(t)
	l := firstLook(t, 10*time.Second, imds.New(imds.Config{Root: fakeRoot(t, qemu), Logger: quiet}))
	assert.True(t, l.Ready)
	assert.Equal(t, termsig.StateUnavailable, l.State)
	assert.ErrorIs(t, l.Err, termsig.ErrUnavailable)
}

func TestFirstLookOfTheSignalSourceIsReady(t *testing.T) {
	l := firstLook(t, 10*time.Second, signal.New())
	assert.True(t, l.Ready)
	assert.NoError(t, l.Err)
}

// Sources are looked at all at once: sources that never get ready take
// the context's time together, not one after the other.
func TestFirstLookRunsTheSourcesAtOnce(t *testing.T) {
	const n, timeout = 4, 300 * time.Millisecond
	var srcs []termsig.Source
	for i := range n {
		f := termsigtest.NewFake(fmt.Sprint("fake", i))
		f.HoldReady()
		srcs = append(srcs, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	looks := sources.FirstLook(ctx, srcs...)
	assert.Less(t, time.Since(start), n*timeout/2)
	require.Len(t, looks, n)
	for i, l := range looks {
		assert.Equal(t, srcs[i].Name(), l.Name, "in the order given")
		assert.False(t, l.Ready)
	}
}

// localFake is a Fake whose first look is said to be local, which
// termsig.New waits for.
type localFake struct{ *termsigtest.Fake }

func (localFake) Traits() termsig.Traits { return termsig.Traits{LocalFirstLook: true} }

// The context alone bounds the look, even of a source whose first look is
// local, for which termsig.New would wait up to its ReadyTimeout.
func TestFirstLookOfALocalSourceEndsWithTheContext(t *testing.T) {
	f := localFake{termsigtest.NewFake("local")}
	f.HoldReady()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	looks := sources.FirstLook(ctx, f)
	assert.Less(t, time.Since(start), termsig.DefaultReadyTimeout/2)
	assert.False(t, looks[0].Ready)
}

// A context that is already done: FirstLook returns at once, stops every
// source, and says for each whether it was ready anyway. No source: no
// Look.
func TestFirstLookWithADoneContextReturnsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	looks := sources.FirstLook(ctx, signal.New(), signal.New()) // the same name twice: a Notifier each
	assert.Less(t, time.Since(start), time.Second)
	require.Len(t, looks, 2)
	for _, l := range looks {
		assert.Equal(t, signal.Name, l.Name)
		assert.Contains(t, []termsig.State{termsig.StateRunning, termsig.StateStopped}, l.State)
	}
	assert.Empty(t, sources.FirstLook(context.Background()))
}

func TestFirstLookOfASourceThatFailsHasItsError(t *testing.T) {
	f := termsigtest.NewFake("broken")
	// Its first look is its Watch returning: a Fake that called Ready
	// first could be seen running, before it returned.
	f.HoldReady()
	boom := errors.New("broken: cannot work")
	f.Fail(boom)
	l := firstLook(t, 10*time.Second, f)
	assert.True(t, l.Ready, "a Watch that returned has had its look")
	assert.Equal(t, termsig.StateFailed, l.State)
	assert.ErrorIs(t, l.Err, boom)
}

func TestFirstLookPanicsOnANilSource(t *testing.T) {
	assert.PanicsWithValue(t, "termsig: nil Source at index 1", func() {
		sources.FirstLook(context.Background(), signal.New(), nil)
	})
	assert.PanicsWithValue(t, "termsig: nil Source at index 0", func() {
		sources.FirstLook(context.Background(), (*imds.Source)(nil))
	})
}

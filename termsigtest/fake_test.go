package termsigtest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/termsigtest"
)

const wait = 5 * time.Second

func watch(f *termsigtest.Fake) (out chan termsig.Notice, errc chan error, cancel context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	out = make(chan termsig.Notice)
	errc = make(chan error, 1)
	go func() { errc <- f.Watch(ctx, out) }()
	return out, errc, cancel
}

func recv[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(wait):
		t.Fatal("nothing received")
	}
	var zero T
	return zero
}

func TestFakeSendBeforeWatch(t *testing.T) {
	f := termsigtest.NewFake("early")
	f.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "1"})
	f.Send(termsig.Notice{Kind: termsig.Stop, Reason: "2", Source: "custom"})
	out, errc, cancel := watch(f)
	defer cancel()
	<-f.Started()

	a := recv(t, out)
	assert.Equal(t, "early", a.Source)
	assert.Equal(t, "1", a.Reason)
	assert.False(t, a.Observed.IsZero())
	b := recv(t, out)
	assert.Equal(t, "custom", b.Source, "Send keeps a Source that is set")
	cancel()
	assert.ErrorIs(t, recv(t, errc), context.Canceled)
}

func TestFakeSendKeepsObserved(t *testing.T) {
	f := termsigtest.NewFake("f")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Send(termsig.Notice{Kind: termsig.Terminate, Observed: at})
	out, _, cancel := watch(f)
	defer cancel()
	assert.Equal(t, at, recv(t, out).Observed)
}

func TestFakeFailAfterNotices(t *testing.T) {
	f := termsigtest.NewFake("f")
	out, errc, cancel := watch(f)
	defer cancel()
	boom := errors.New("boom")
	f.Send(termsig.Notice{Kind: termsig.Terminate})
	f.Fail(boom)
	f.Fail(errors.New("ignored: only the first Fail counts"))
	recv(t, out)
	assert.ErrorIs(t, recv(t, errc), boom)
}

func TestFakeFailBeforeWatch(t *testing.T) {
	f := termsigtest.NewFake("f")
	f.Fail(fmt.Errorf("nope: %w", termsig.ErrUnavailable))
	_, errc, cancel := watch(f)
	defer cancel()
	assert.ErrorIs(t, recv(t, errc), termsig.ErrUnavailable)
}

func TestFakeFailNil(t *testing.T) {
	f := termsigtest.NewFake("f")
	f.Fail(nil)
	_, errc, cancel := watch(f)
	defer cancel()
	assert.NoError(t, recv(t, errc))
}

func TestFakeUndeliveredNoticesStayQueued(t *testing.T) {
	f := termsigtest.NewFake("f")
	f.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "kept"})
	_, errc, cancel := watch(f) // nobody reads out
	<-f.Started()
	cancel()
	require.ErrorIs(t, recv(t, errc), context.Canceled)

	out, _, cancel2 := watch(f)
	defer cancel2()
	assert.Equal(t, "kept", recv(t, out).Reason)
}

func TestFakeConcurrentSenders(t *testing.T) {
	const senders, each = 8, 100
	f := termsigtest.NewFake("f")
	n := termsig.Config{Buffer: 1}.New(f)
	defer n.Stop()
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				f.Send(termsig.Notice{Kind: termsig.Maintenance, Reason: fmt.Sprintf("%d/%d", s, i)})
			}
		})
	}
	seen := map[string]bool{}
	for range senders * each {
		nt := recv(t, n.C())
		require.False(t, seen[nt.Reason], "duplicate %s", nt.Reason)
		seen[nt.Reason] = true
	}
	wg.Wait()
	assert.Len(t, seen, senders*each)
}

func ExampleFake() {
	f := termsigtest.NewFake("imds")
	n := termsig.New(f)
	defer n.Stop()

	f.Send(termsig.Notice{Kind: termsig.Stop, Reason: "spot interruption: stop"})
	nt := <-n.C()
	fmt.Println(nt.Source, nt.Kind, nt.Kind.Imminent(), nt.Reason)
	// Output: imds stop true spot interruption: stop
}

func TestFakeReportShowsInStatus(t *testing.T) {
	f := termsigtest.NewFake("imds")
	n := termsig.Config{Logger: discard}.New(f)
	defer n.Stop()
	down := errors.New("unreachable")
	f.Report(down)
	f.Send(termsig.Notice{Kind: termsig.Rebalance}) // delivered after the report
	recv(t, n.C())
	assert.ErrorIs(t, n.Status()[0].Err, down)
	f.Report(nil)
	f.Send(termsig.Notice{Kind: termsig.Cleared})
	recv(t, n.C())
	assert.NoError(t, n.Status()[0].Err)
	assert.Equal(t, termsig.StateRunning, n.Status()[0].State)
}

func TestFakeReadyAtOnceUnlessHeld(t *testing.T) {
	f := termsigtest.NewFake("f")
	n := termsig.Config{Logger: discard}.New(f)
	select {
	case <-n.Ready():
	case <-time.After(wait):
		t.Fatal("a Fake is ready when Watch starts")
	}
	n.Stop()

	g := termsigtest.NewFake("g")
	g.HoldReady()
	n = termsig.Config{Logger: discard}.New(g)
	defer n.Stop()
	<-g.Started()
	g.Send(termsig.Notice{Kind: termsig.Maintenance})
	recv(t, n.C())
	select {
	case <-n.Ready():
		t.Fatal("ready while held")
	default:
	}
	g.SetReady()
	select {
	case <-n.Ready():
	case <-time.After(wait):
		t.Fatal("SetReady did not make it ready")
	}
}

func TestFakePanic(t *testing.T) {
	f := termsigtest.NewFake("f")
	f.Send(termsig.Notice{Kind: termsig.Terminate})
	f.Panic("broken")
	f.Fail(errors.New("ignored: Panic came first"))
	out := make(chan termsig.Notice, 1)
	assert.PanicsWithValue(t, "broken", func() { _ = f.Watch(context.Background(), out) })
	assert.Equal(t, termsig.Terminate, (<-out).Kind, "what was sent before is delivered first")
}

func TestFakeWatchedTwiceAtOncePanics(t *testing.T) {
	f := termsigtest.NewFake("f")
	_, errc, cancel := watch(f)
	defer cancel()
	<-f.Started()
	assert.PanicsWithValue(t, "termsig: termsigtest.Fake f watched twice at once", func() {
		_ = f.Watch(context.Background(), nil)
	})
	cancel()
	assert.ErrorIs(t, recv(t, errc), context.Canceled)
}

var discard = slog.New(slog.DiscardHandler)

// SetReady before Watch starts still comes after the notices sent before
// it: a test of "a notice already posted at start" sees it on C once Ready
// is closed.
func TestFakeSetReadyBeforeWatchKeepsOrder(t *testing.T) {
	for range 200 {
		f := termsigtest.NewFake("imds")
		f.HoldReady()
		f.Send(termsig.Notice{Kind: termsig.Terminate})
		f.SetReady()
		n := termsig.Config{Logger: discard}.New(f)
		select {
		case <-n.Ready():
		case <-time.After(wait):
			t.Fatal("not ready")
		}
		select {
		case <-n.C():
		default:
			n.Stop()
			t.Fatal("Ready closed before the notice sent before SetReady was on C")
		}
		n.Stop()
	}
}

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

// watch runs f under a Notifier of its own, whose C holds one notice, and
// returns C, what f's Watch returns, and the Notifier's Stop.
func watch(f *termsigtest.Fake) (out <-chan termsig.Notice, errc chan error, stop func()) {
	w := &watched{f, make(chan error, 1)}
	n := termsig.Config{Logger: discard, Buffer: 1}.New(w)
	return n.C(), w.errc, n.Stop
}

// watched is f, with what its Watch returned sent on errc.
type watched struct {
	f    *termsigtest.Fake
	errc chan error
}

func (w *watched) Name() string { return w.f.Name() }
func (w *watched) Watch(ctx context.Context, r *termsig.Run) error {
	err := w.f.Watch(ctx, r)
	w.errc <- err
	return err
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
	assert.Equal(t, "early", b.Source, "the Notifier names the source, whatever Send was given")
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
	first := f.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "fills C"})
	kept := f.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "kept"})
	out, errc, stop := watch(f) // nobody reads out
	recv(t, first)
	stop()
	require.ErrorIs(t, recv(t, errc), context.Canceled)
	assert.Equal(t, []string{"fills C"}, reasons(out), "the notice on C is still there after Stop")
	stillOpen(t, kept, "a notice not delivered")

	out, _, stop = watch(f)
	defer stop()
	recv(t, kept)
	assert.Equal(t, "kept", recv(t, out).Reason, "each notice delivered once, in order")
}

// Send's channel is closed once the notice is on C, in order, and not
// before: with a Buffer of 1 and nobody reading, the second notice waits.
func TestFakeSendSaysWhenTheNoticeIsOnC(t *testing.T) {
	f := termsigtest.NewFake("f")
	a := f.Send(termsig.Notice{Kind: termsig.Maintenance, Reason: "a"})
	b := f.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "b"})
	stillOpen(t, a, "a before Watch")
	out, _, stop := watch(f)
	defer stop()
	recv(t, a)
	assert.Len(t, out, 1, "a is in C's buffer")
	stillOpen(t, b, "b while C is full")
	assert.Equal(t, "a", recv(t, out).Reason)
	recv(t, b) // so a has left C: its buffer holds one
	assert.Equal(t, "b", recv(t, out).Reason)
}

// stillOpen fails the test if c is closed.
func stillOpen(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
		t.Fatalf("%s: closed", what)
	default:
	}
}

// reasons drains out, which must be closed, and returns the notices'
// reasons.
func reasons(out <-chan termsig.Notice) []string {
	var got []string
	for nt := range out {
		got = append(got, nt.Reason)
	}
	return got
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
	n := termsig.Config{Logger: discard}.New(f)
	defer n.Stop()
	assert.Equal(t, termsig.Terminate, recv(t, n.C()).Kind, "what was sent before is delivered first")
	n.Stop() // Status is final once Stop has returned
	var pe *termsig.PanicError
	require.ErrorAs(t, n.Status()[0].Err, &pe)
	assert.Equal(t, "broken", pe.Value)
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

func TestFakeNoticesSentBeforeWatchAreOnCWhenReadyCloses(t *testing.T) {
	for range 50 {
		f := termsigtest.NewFake("imds")
		posted := f.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "posted before start"})
		n := termsig.Config{Logger: discard}.New(f)
		recv(t, n.Ready())
		select {
		case <-posted:
		default:
			t.Fatal("Ready closed before the notice found at the first look was on C")
		}
		select {
		case nt := <-n.C():
			assert.Equal(t, "posted before start", nt.Reason)
		default:
			t.Fatal("C is empty once Ready has closed")
		}
		n.Stop()
	}
}

func TestFakeFailBeforeWatchDeliversWhatWasSentFirst(t *testing.T) {
	f := termsigtest.NewFake("f")
	sent := f.Send(termsig.Notice{Kind: termsig.Terminate})
	f.Fail(errors.New("boom"))
	out, errc, cancel := watch(f)
	defer cancel()
	recv(t, sent)
	assert.Equal(t, termsig.Terminate, recv(t, out).Kind)
	assert.EqualError(t, recv(t, errc), "boom")
}

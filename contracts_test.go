package termsig_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/termsigtest"
)

func closed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(wait):
		t.Fatalf("%s: not closed", what)
	}
}

func notClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
		t.Fatalf("%s: closed too early", what)
	default:
	}
}

func quiet() termsig.Config { return termsig.Config{Logger: slog.New(slog.DiscardHandler)} }

func TestReadyWaitsForEveryFirstLook(t *testing.T) {
	slow := termsigtest.NewFake("slow")
	slow.HoldReady()
	quick := termsigtest.NewFake("quick")
	plain := &scripted{name: "plain"} // ready as soon as it starts
	n := quiet().New(slow, quick, plain)
	defer n.Stop()
	<-slow.Started()
	<-quick.Started()
	notClosed(t, n.Ready(), "Ready before slow's first look")

	// Ready is not held up by notices: a source may send before it is ready.
	slow.Send(termsig.Notice{Kind: termsig.Rebalance})
	receive(t, n.C())
	notClosed(t, n.Ready(), "Ready before slow's first look")

	slow.SetReady()
	closed(t, n.Ready(), "Ready")
}

func TestReadyWhenSourcesEnd(t *testing.T) {
	gone := termsigtest.NewFake("gone")
	gone.HoldReady()
	gone.Fail(fmt.Errorf("elsewhere: %w", termsig.ErrUnavailable))
	n := quiet().New(gone)
	defer n.Stop()
	closed(t, n.Ready(), "Ready after the only source ended")

	none := quiet().New()
	closed(t, none.Ready(), "Ready with no sources")
	none.Stop()
}

// neverReady is a source whose first look is local and never calls Ready.
type neverReady struct{}

func (neverReady) Name() string           { return "stuck-setup" }
func (neverReady) Traits() termsig.Traits { return termsig.Traits{LocalFirstLook: true} }
func (neverReady) Watch(ctx context.Context, _ *termsig.Run) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestNewWaitsForLocalReadyAtMostReadyTimeout(t *testing.T) {
	logs := testlog.New()
	start := time.Now()
	n := termsig.Config{Logger: logs.Logger(), ReadyTimeout: 50 * time.Millisecond}.New(neverReady{}, termsigtest.NewFake("ok"))
	took := time.Since(start)
	defer n.Stop()
	assert.GreaterOrEqual(t, took, 50*time.Millisecond, "New waited for the local source")
	assert.Less(t, took, wait)
	rec := logs.WaitFor(t, "termsig: sources not set up in time; New returns without them", 1)
	assert.Equal(t, "stuck-setup", testlog.Attr(rec, "sources"))
	assert.Equal(t, slog.LevelWarn, rec.Level)
	notClosed(t, n.Ready(), "Ready with a source that never got ready")
}

func TestNewDoesNotWaitForSourcesWhoseFirstLookIsRemote(t *testing.T) {
	f := termsigtest.NewFake("metadata") // zero Traits: its first look is remote
	f.HoldReady()
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler), ReadyTimeout: time.Hour}.New(f)
	defer n.Stop()
	notClosed(t, n.Ready(), "Ready")
}

func TestPanickingSourceFailsAlone(t *testing.T) {
	logs := testlog.New()
	bad := termsigtest.NewFake("bad")
	good := termsigtest.NewFake("good")
	n := termsig.Config{Logger: logs.Logger()}.New(bad, good)
	defer n.Stop()

	bad.Send(termsig.Notice{Kind: termsig.Rebalance})
	bad.Panic("index out of range")
	assert.Equal(t, "bad", receive(t, n.C()).Source)
	rec := logs.WaitFor(t, "termsig: source panicked", 1)
	assert.Contains(t, testlog.Attr(rec, "stack"), "termsigtest.(*Fake).Watch", "the stack is logged")

	good.Send(termsig.Notice{Kind: termsig.Terminate})
	assert.Equal(t, "good", receive(t, n.C()).Source, "the others go on")

	st := n.Status()
	assert.Equal(t, termsig.StateFailed, st[0].State)
	var pe *termsig.PanicError
	require.ErrorAs(t, st[0].Err, &pe)
	assert.Equal(t, "index out of range", pe.Value)
	assert.Equal(t, "bad", pe.Source)
	assert.EqualError(t, st[0].Err, "termsig: source bad panicked: index out of range")
	assert.Equal(t, termsig.StateRunning, st[1].State)

	// A panic with an error value unwraps to it.
	boom := errors.New("boom")
	assert.ErrorIs(t, &termsig.PanicError{Value: boom}, boom)
}

func TestTypedNilSourcePanics(t *testing.T) {
	assert.PanicsWithValue(t, "termsig: nil Source at index 0", func() {
		termsig.New((*termsigtest.Fake)(nil))
	})
	var s *scripted
	assert.PanicsWithValue(t, "termsig: nil Source at index 1", func() {
		termsig.New(termsigtest.NewFake("a"), s)
	})
}

// stuck is a Source that ignores ctx until release is closed.
type stuck struct {
	name    string
	release chan struct{}
	started chan struct{}
}

func newStuck(name string) *stuck {
	return &stuck{name: name, release: make(chan struct{}), started: make(chan struct{})}
}

func (s *stuck) Name() string { return s.name }
func (s *stuck) Watch(ctx context.Context, _ *termsig.Run) error {
	close(s.started)
	<-s.release
	return ctx.Err()
}

func TestShutdownNamesSourcesStillRunning(t *testing.T) {
	s := newStuck("hung")
	n := quiet().New(s, termsigtest.NewFake("fine"))
	<-s.started

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := n.Shutdown(ctx)
	var se *termsig.ShutdownError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, []string{"hung"}, se.Running)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualError(t, err, "termsig: shutdown: sources still running: hung: context deadline exceeded")
	select {
	case <-n.C():
		t.Fatal("C closed while a source still runs")
	default:
	}

	close(s.release)
	require.NoError(t, n.Shutdown(context.Background()), "a second Shutdown waits for the rest")
	_, ok := <-n.C()
	assert.False(t, ok, "C is closed once the last source has returned")
	n.Stop() // and Stop after Shutdown is fine
}

func TestShutdownReturnsNilWhenAllReturn(t *testing.T) {
	n := quiet().New(termsigtest.NewFake("a"))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, n.Shutdown(ctx))
	_, ok := <-n.C()
	assert.False(t, ok)
}

func TestNotifyContextStopIsBounded(t *testing.T) {
	logs := testlog.New()
	s := newStuck("hung")
	defer close(s.release) // let its goroutine end, for goleak
	_, stop := termsig.Config{Logger: logs.Logger(), StopTimeout: 30 * time.Millisecond}.NotifyContext(context.Background(), s)
	<-s.started
	start := time.Now()
	stop()
	assert.Less(t, time.Since(start), wait)
	rec := logs.WaitFor(t, "termsig: stop gave up waiting for sources", 1)
	assert.Equal(t, slog.LevelError, rec.Level)
	assert.Contains(t, testlog.Attr(rec, "sources"), "hung")
}

func TestNilLoggerMeansSlogDefault(t *testing.T) {
	logs := testlog.New()
	prev := slog.Default()
	slog.SetDefault(logs.Logger())
	defer slog.SetDefault(prev)

	f := termsigtest.NewFake("f")
	f.Fail(errors.New("broken"))
	n := termsig.New(f)
	defer n.Stop()
	logs.WaitFor(t, "termsig: source failed", 1)
}

func TestLastPlatformSourceEndingIsAnError(t *testing.T) {
	logs := testlog.New()
	local := &localFake{termsigtest.NewFake("signal")}
	imds := termsigtest.NewFake("imds")
	gce := termsigtest.NewFake("gcemeta")
	n := termsig.Config{Logger: logs.Logger()}.New(local, imds, gce)
	defer n.Stop()

	imds.Fail(errors.New("gave up"))
	logs.WaitFor(t, "termsig: source failed", 1)
	assert.Equal(t, 0, logs.Count("termsig: no platform source is watching any more"), "gcemeta still watches")

	gce.Fail(fmt.Errorf("not here: %w", termsig.ErrUnavailable))
	rec := logs.WaitFor(t, "termsig: no platform source is watching any more", 1)
	assert.Equal(t, slog.LevelError, rec.Level)
	assert.Equal(t, "gcemeta", testlog.Attr(rec, "last"))

	n.Stop()
	assert.Equal(t, 1, logs.Count("termsig: no platform source is watching any more"), "a local source ending is not")
}

func TestStopIsNotLoggedAsLosingPlatformSources(t *testing.T) {
	logs := testlog.New()
	n := termsig.Config{Logger: logs.Logger()}.New(termsigtest.NewFake("imds"))
	n.Stop()
	assert.Equal(t, 0, logs.CountLevel(slog.LevelError))
}

// localFake is a Fake whose notices concern only this process, as the
// signal source's do.
type localFake struct{ *termsigtest.Fake }

func (localFake) Traits() termsig.Traits { return termsig.Traits{Local: true} }

func TestRunAfterWatchReturnedChangesNothing(t *testing.T) {
	// A source that reports or sends after it returned (a goroutine it left
	// behind) neither overwrites the state the Notifier recorded nor
	// reaches C, and the late send is logged as a broken contract.
	logs := testlog.New()
	s := &runGrabber{got: make(chan *termsig.Run, 1)}
	n := termsig.Config{Logger: logs.Logger()}.New(s)
	leaked := <-s.got
	n.Stop()
	leaked.Report(errors.New("late"))
	leaked.Heard()
	leaked.Ready()
	err := leaked.Send(context.Background(), termsig.Notice{Kind: termsig.Terminate})
	assert.Error(t, err)
	rec := logs.WaitFor(t, "termsig: source sent a notice after its Watch returned; notice dropped", 1)
	assert.Equal(t, slog.LevelError, rec.Level)
	st := n.Status()[0]
	assert.Equal(t, termsig.StateStopped, st.State)
	assert.NoError(t, st.Err)
	assert.Zero(t, st.Notices)
	assert.True(t, st.LastHeard.IsZero())
	_, ok := <-n.C()
	assert.False(t, ok, "nothing reached C")
}

func TestSendAfterWatchReturnedBeforeStopIsDropped(t *testing.T) {
	logs := testlog.New()
	s := &runGrabber{got: make(chan *termsig.Run, 1), early: true}
	n := termsig.Config{Logger: logs.Logger()}.New(s, termsigtest.NewFake("other"))
	defer n.Stop()
	leaked := <-s.got
	logs.WaitFor(t, "termsig: source returned before Stop", 1)
	assert.Error(t, leaked.Send(context.Background(), termsig.Notice{Kind: termsig.Terminate}))
	logs.WaitFor(t, "termsig: source sent a notice after its Watch returned; notice dropped", 1)
	select {
	case nt := <-n.C():
		t.Fatalf("a notice sent after Watch returned reached C: %v", nt)
	default:
	}
}

// runGrabber hands its Run to the test, then waits for ctx or, if early,
// returns at once.
type runGrabber struct {
	got   chan *termsig.Run
	early bool
}

func (s *runGrabber) Name() string { return "grabber" }
func (s *runGrabber) Watch(ctx context.Context, r *termsig.Run) error {
	r.Ready()
	s.got <- r
	if s.early {
		return nil
	}
	<-ctx.Done()
	return nil
}

func TestSourcesWithOneNameAreRefused(t *testing.T) {
	assert.PanicsWithValue(t, `termsig: sources at index 0 and 2 are both named "imds"`, func() {
		termsig.New(termsigtest.NewFake("imds"), termsigtest.NewFake("signal"), termsigtest.NewFake("imds"))
	})
}

func TestNotifyContextKeepsSourcesUntilStop(t *testing.T) {
	logs := testlog.New()
	f := termsigtest.NewFake("acpi")
	ctx, stop := termsig.Config{Logger: logs.Logger()}.NotifyContext(context.Background(), f)
	defer stop()

	f.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "power button"})
	done(t, ctx)
	deadline := time.Now().Add(30 * time.Second)
	f.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "SIGTERM", Deadline: deadline})
	f.Send(termsig.Notice{Kind: termsig.Cleared, Reason: "rebalance withdrawn"})
	rec := logs.WaitFor(t, "termsig: another imminent notice while draining", 1)
	assert.Equal(t, slog.LevelWarn, rec.Level)
	assert.Contains(t, testlog.Attr(rec, "notice"), "SIGTERM")
	assert.Contains(t, testlog.Attr(rec, "deadline"), deadline.Format("15:04:05"))
	logs.WaitFor(t, "termsig: notice does not cancel the context", 1)

	nt, ok := termsig.Cause(ctx)
	require.True(t, ok)
	assert.Equal(t, "power button", nt.Reason, "the first notice stays the cause")

	stop()
	stop() // twice is fine
}

// sendThenReady sends its notice, then calls Ready, then waits.
type sendThenReady struct{ nt termsig.Notice }

func (s sendThenReady) Name() string { return "posted" }
func (s sendThenReady) Watch(ctx context.Context, r *termsig.Run) error {
	if err := r.Send(ctx, s.nt); err != nil {
		return err
	}
	r.Ready()
	<-ctx.Done()
	return ctx.Err()
}

// A spot interruption already posted at start is on C by the time Ready
// is closed, so a program that checks C once Ready is closed sees it.
func TestNoticesBeforeReadyAreOnCWhenReadyCloses(t *testing.T) {
	for range 300 {
		n := quiet().New(sendThenReady{termsig.Notice{Kind: termsig.Terminate}})
		closed(t, n.Ready(), "Ready")
		select {
		case nt := <-n.C():
			require.Equal(t, termsig.Terminate, nt.Kind)
		default:
			n.Stop()
			t.Fatal("Ready closed before the notice sent before it was on C")
		}
		n.Stop()
	}
}

func TestStatusIsFinalWhenReadyCloses(t *testing.T) {
	for range 100 {
		f := termsigtest.NewFake("gone")
		f.HoldReady()
		f.Fail(fmt.Errorf("elsewhere: %w", termsig.ErrUnavailable))
		n := quiet().New(f)
		closed(t, n.Ready(), "Ready")
		require.Equal(t, termsig.StateUnavailable, n.Status()[0].State)
		n.Stop()
	}
}

// sendThenReturn sends its notice and returns, without calling Ready.
type sendThenReturn struct{}

func (sendThenReturn) Name() string { return "brief" }
func (sendThenReturn) Watch(ctx context.Context, r *termsig.Run) error {
	_ = r.Send(ctx, termsig.Notice{Kind: termsig.Terminate})
	return nil
}

func TestNoticesOfAReturnedSourceAreOnCWhenReadyCloses(t *testing.T) {
	for range 300 {
		n := quiet().New(sendThenReturn{})
		closed(t, n.Ready(), "Ready")
		select {
		case <-n.C():
		default:
			n.Stop()
			t.Fatal("Ready closed before the notice of a source that returned was on C")
		}
		n.Stop()
	}
}

// goexiter is a source whose Watch calls runtime.Goexit, as t.FailNow in a
// test's source does.
type goexiter struct{}

func (goexiter) Name() string { return "goexit" }
func (goexiter) Watch(context.Context, *termsig.Run) error {
	runtime.Goexit()
	return nil
}

func TestGoexitInWatchIsAFailure(t *testing.T) {
	n := quiet().New(goexiter{})
	defer n.Stop()
	closed(t, n.Ready(), "Ready")
	st := n.Status()[0]
	assert.Equal(t, termsig.StateFailed, st.State)
	assert.ErrorContains(t, st.Err, "runtime.Goexit")
}

func TestNoPlatformSourceAppliesIsInfo(t *testing.T) {
	logs := testlog.New()
	gone := termsigtest.NewFake("imds")
	gone.Fail(fmt.Errorf("not EC2: %w", termsig.ErrUnavailable))
	n := termsig.Config{Logger: logs.Logger()}.New(localFake{termsigtest.NewFake("signal")}, gone)
	defer n.Stop()
	rec := logs.WaitFor(t, "termsig: no platform source applies on this host; only signals are watched", 1)
	assert.Equal(t, slog.LevelInfo, rec.Level)
	assert.Equal(t, 0, logs.CountLevel(slog.LevelError), "a laptop is not an error")
}

// statusLogger is a slog.Handler that calls Status while it handles a record.
type statusLogger struct {
	n    chan *termsig.Notifier
	seen chan struct{}
}

func (h *statusLogger) Enabled(context.Context, slog.Level) bool { return true }
func (h *statusLogger) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *statusLogger) WithGroup(string) slog.Handler            { return h }
func (h *statusLogger) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "termsig: source error, retrying" {
		n := <-h.n
		_ = n.Status()
		close(h.seen)
	}
	return nil
}

func TestLogHandlerMayCallStatus(t *testing.T) {
	h := &statusLogger{n: make(chan *termsig.Notifier, 1), seen: make(chan struct{})}
	f := termsigtest.NewFake("flaky")
	f.Report(errors.New("unreachable"))
	n := termsig.Config{Logger: slog.New(h)}.New(f)
	defer n.Stop()
	h.n <- n
	closed(t, h.seen, "the handler's Status call")
}

// localReady is a source whose first look is local and is ready at once.
type localReady struct{}

func (localReady) Name() string           { return "local" }
func (localReady) Traits() termsig.Traits { return termsig.Traits{LocalFirstLook: true} }
func (localReady) Watch(ctx context.Context, r *termsig.Run) error {
	r.Ready()
	<-ctx.Done()
	return nil
}

func TestReadyIsClosedWhenNewReturnsForLocalSources(t *testing.T) {
	for range 300 {
		n := quiet().New(localReady{})
		select {
		case <-n.Ready():
		default:
			n.Stop()
			t.Fatal("New returned for its only, local source before Ready was closed")
		}
		n.Stop()
	}
}

func TestStatusCountsANoticeOnceItIsReceived(t *testing.T) {
	for range 300 {
		f := termsigtest.NewFake("f")
		n := quiet().New(f)
		f.Send(termsig.Notice{Kind: termsig.Terminate})
		receive(t, n.C())
		require.Equal(t, 1, n.Status()[0].Notices)
		require.False(t, n.Status()[0].LastHeard.IsZero())
		n.Stop()
	}
}

package termsig_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/termsigtest"
)

// wait is how long a test waits for something that should happen at once.
// It is long so that a slow -race run does not fail; a pass takes far less.
const wait = 5 * time.Second

func receive(t *testing.T, c <-chan termsig.Notice) termsig.Notice {
	t.Helper()
	select {
	case n, ok := <-c:
		require.True(t, ok, "channel closed")
		return n
	case <-time.After(wait):
		t.Fatal("no notice")
	}
	return termsig.Notice{}
}

func TestFakeTerminateArrivesWithin10ms(t *testing.T) {
	timing.Within(t, 10*time.Millisecond, 3, func() time.Duration {
		f := termsigtest.NewFake("fake")
		n := termsig.New(f)
		defer n.Stop()
		<-f.Started()

		sent := time.Now()
		f.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "test"})
		got := receive(t, n.C())
		took := time.Since(sent)
		assert.Equal(t, termsig.Terminate, got.Kind)
		assert.Equal(t, "fake", got.Source)
		assert.Equal(t, "test", got.Reason)
		assert.False(t, got.Observed.IsZero())
		return took
	})
}

func TestNotifierFillsSourceAndObserved(t *testing.T) {
	s := &scripted{name: "scripted", notices: []termsig.Notice{{Kind: termsig.Reboot}}}
	before := time.Now()
	n := termsig.New(s)
	defer n.Stop()
	got := receive(t, n.C())
	assert.Equal(t, "scripted", got.Source)
	assert.False(t, got.Observed.Before(before))
}

func TestNoticeIsNeverDroppedBySlowConsumer(t *testing.T) {
	const count = 500
	f := termsigtest.NewFake("fake")
	g := termsigtest.NewFake("other")
	n := termsig.Config{Buffer: 1}.New(f, g)
	defer n.Stop()
	for i := range count {
		f.Send(termsig.Notice{Kind: termsig.Maintenance, Reason: fmt.Sprint(i)})
		g.Send(termsig.Notice{Kind: termsig.Rebalance, Reason: fmt.Sprint(i)})
	}
	next := map[string]int{}
	for range 2 * count {
		got := receive(t, n.C())
		// Each source's notices arrive in the order it sent them.
		require.Equal(t, fmt.Sprint(next[got.Source]), got.Reason, "source %s", got.Source)
		next[got.Source]++
	}
	assert.Equal(t, map[string]int{"fake": count, "other": count}, next)
	n.Stop() // Status is final once Stop has returned
	st := n.Status()
	assert.Equal(t, count, st[0].Notices)
	assert.Equal(t, count, st[1].Notices)
}

func TestStopWhileConsumerNeverReads(t *testing.T) {
	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		s := &scripted{name: "blocked", sent: make(chan int, 10), trying: make(chan int, 10), ret: make(chan error, 1)}
		for i := range 5 {
			s.notices = append(s.notices, termsig.Notice{Kind: termsig.Terminate, Reason: fmt.Sprint(i)})
		}
		n := termsig.Config{Buffer: 1}.New(s)
		// The first notice fills C's buffer, and the source is blocked
		// sending the second.
		for want := range 2 {
			select {
			case i := <-s.trying:
				require.Equal(t, want, i)
			case <-time.After(wait):
				t.Fatal("source did not try to send")
			}
		}

		start := time.Now()
		n.Stop()
		took := time.Since(start)
		select {
		case err := <-s.ret:
			assert.ErrorIs(t, err, context.Canceled)
		default:
			t.Fatal("Stop returned before the source's Watch")
		}

		n.Stop() // twice is fine
		var got []string
		for nt := range n.C() { // ends: C is closed
			got = append(got, nt.Reason)
		}
		assert.Equal(t, []string{"0"}, got, "the buffered notice is still readable")
		assert.Equal(t, termsig.StateStopped, n.Status()[0].State)
		return took
	})
}

func TestStopConcurrently(t *testing.T) {
	f := termsigtest.NewFake("fake")
	n := termsig.New(f, termsigtest.NewFake("other"))
	<-f.Started()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(n.Stop)
	}
	wg.Wait()
	_, ok := <-n.C()
	assert.False(t, ok)
	for _, st := range n.Status() {
		assert.Equal(t, termsig.StateStopped, st.State, st.Name)
		assert.NoError(t, st.Err)
	}
}

func TestNoSources(t *testing.T) {
	n := termsig.New()
	assert.Empty(t, n.Status())
	n.Stop()
	_, ok := <-n.C()
	assert.False(t, ok)
}

func TestNilSourcePanics(t *testing.T) {
	assert.PanicsWithValue(t, "termsig: nil Source at index 1", func() {
		termsig.New(termsigtest.NewFake("a"), nil)
	})
}

func TestUnavailableSourceRetiresQuietly(t *testing.T) {
	logs := testlog.New()
	gone := termsigtest.NewFake("gone")
	live := termsigtest.NewFake("live")
	gone.Fail(fmt.Errorf("not on this cloud: %w", termsig.ErrUnavailable))
	n := termsig.Config{Logger: logs.Logger()}.New(gone, live)
	defer n.Stop()

	logs.WaitFor(t, "termsig: source unavailable", 1)
	live.Send(termsig.Notice{Kind: termsig.Terminate})
	assert.Equal(t, "live", receive(t, n.C()).Source)

	st := n.Status()
	assert.Equal(t, "gone", st[0].Name)
	assert.Equal(t, termsig.StateUnavailable, st[0].State)
	assert.ErrorIs(t, st[0].Err, termsig.ErrUnavailable)
	assert.Equal(t, termsig.StateRunning, st[1].State)
	assert.Equal(t, 0, logs.CountLevel(slog.LevelError), "unavailable is not an error")

	n.Stop()
	st = n.Status()
	assert.Equal(t, termsig.StateUnavailable, st[0].State, "Stop keeps the reason it retired")
	assert.Equal(t, 1, st[1].Notices)
	assert.False(t, st[1].LastHeard.IsZero())
}

func TestFailingSourceDoesNotDisturbOthers(t *testing.T) {
	logs := testlog.New()
	bad := termsigtest.NewFake("bad")
	good := termsigtest.NewFake("good")
	n := termsig.Config{Logger: logs.Logger()}.New(bad, good)
	defer n.Stop()

	boom := errors.New("boom")
	bad.Send(termsig.Notice{Kind: termsig.Rebalance})
	bad.Fail(boom)
	assert.Equal(t, "bad", receive(t, n.C()).Source, "notices sent before Fail are delivered")
	logs.WaitFor(t, "termsig: source failed", 1)
	good.Send(termsig.Notice{Kind: termsig.Stop})
	assert.Equal(t, "good", receive(t, n.C()).Source)

	st := n.Status()
	assert.Equal(t, termsig.StateFailed, st[0].State)
	assert.ErrorIs(t, st[0].Err, boom)
	assert.Equal(t, termsig.StateRunning, st[1].State)
}

func TestLastSourceEndingIsLogged(t *testing.T) {
	logs := testlog.New()
	f := termsigtest.NewFake("f")
	f.Fail(nil)
	n := termsig.Config{Logger: logs.Logger()}.New(f)
	defer n.Stop()
	logs.WaitFor(t, "termsig: no platform source is watching any more", 1)
	assert.Equal(t, 1, logs.CountLevel(slog.LevelError))
	st := n.Status()[0]
	assert.Equal(t, termsig.StateStopped, st.State)
	assert.NoError(t, st.Err)
	assert.Equal(t, 1, logs.Count("termsig: source returned before Stop"))
}

func TestReportShowsInStatusAndLogsOncePerChange(t *testing.T) {
	logs := testlog.New()
	unreachable := errors.New("metadata service unreachable")
	s := &scripted{name: "flaky", reports: []error{unreachable, unreachable, unreachable}}
	s.notices = []termsig.Notice{{Kind: termsig.Maintenance, Reason: "after errors"}}
	s.then = []error{nil, nil}
	s.gate = make(chan struct{})
	n := termsig.Config{Logger: logs.Logger()}.New(s)
	defer n.Stop()

	// scripted reports its errors, sends its notice, then reports nil twice
	// and sends a second notice.
	receive(t, n.C())
	st := n.Status()[0]
	assert.Equal(t, termsig.StateRunning, st.State)
	assert.ErrorIs(t, st.Err, unreachable)
	close(s.gate)
	receive(t, n.C())
	assert.NoError(t, n.Status()[0].Err)

	assert.Equal(t, 1, logs.Count("termsig: source error, retrying"))
	assert.Equal(t, 1, logs.Count("termsig: source healthy again"))
}

func TestStateString(t *testing.T) {
	assert.Equal(t, "running", termsig.StateRunning.String())
	assert.Equal(t, "unavailable", termsig.StateUnavailable.String())
	assert.Equal(t, "failed", termsig.StateFailed.String())
	assert.Equal(t, "stopped", termsig.StateStopped.String())
	assert.Equal(t, "state(0)", termsig.State(0).String())
}

// scripted is a Source that reports the errors in reports, sends notices,
// reports the errors in then, sends a copy of the last notice if then is not
// empty, and waits for ctx. It tells the test on trying before each send
// and on sent after it, and returns Watch's result on ret.
type scripted struct {
	name    string
	reports []error
	notices []termsig.Notice
	then    []error
	gate    chan struct{} // if not nil, closed by the test to start "then"
	trying  chan int
	sent    chan int
	ret     chan error
}

func (s *scripted) Name() string { return s.name }

func (s *scripted) Watch(ctx context.Context, r *termsig.Run) (err error) {
	if s.ret != nil {
		defer func() { s.ret <- err }()
	}
	r.Ready()
	send := func(i int, n termsig.Notice) error {
		if s.trying != nil {
			s.trying <- i
		}
		if err := r.Send(ctx, n); err != nil {
			return err
		}
		if s.sent != nil {
			s.sent <- i
		}
		return nil
	}
	for _, e := range s.reports {
		r.Report(e)
	}
	for i, n := range s.notices {
		if err := send(i, n); err != nil {
			return err
		}
	}
	if len(s.then) > 0 {
		if s.gate != nil {
			select {
			case <-s.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for _, e := range s.then {
			r.Report(e)
		}
		if err := send(len(s.notices), s.notices[len(s.notices)-1]); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

// readySource is a source whose first look is local: it sets armed, then
// calls Ready, unless it fails first.
type readySource struct {
	armed atomic.Bool
	fail  error
}

func (s *readySource) Name() string           { return "ready" }
func (s *readySource) Traits() termsig.Traits { return termsig.Traits{LocalFirstLook: true} }

func (s *readySource) Watch(ctx context.Context, r *termsig.Run) error {
	if s.fail != nil {
		return s.fail
	}
	s.armed.Store(true)
	r.Ready()
	r.Ready() // twice is fine
	<-ctx.Done()
	return ctx.Err()
}

func TestNewWaitsForSourcesWhoseFirstLookIsLocal(t *testing.T) {
	for range 20 {
		s := &readySource{}
		n := termsig.New(s, termsigtest.NewFake("other"))
		assert.True(t, s.armed.Load(), "New returned before the source was ready")
		n.Stop()
	}
	// One that ends without calling Ready does not hang New.
	n := termsig.New(&readySource{fail: fmt.Errorf("no: %w", termsig.ErrUnavailable)})
	n.Stop()
	assert.Equal(t, termsig.StateUnavailable, n.Status()[0].State)
}

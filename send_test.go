package termsig_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/termsigtest"
)

// funcSource is a Source made of a function.
type funcSource struct {
	name  string
	watch func(ctx context.Context, r *termsig.Run) error
}

func (s *funcSource) Name() string                                    { return s.name }
func (s *funcSource) Watch(ctx context.Context, r *termsig.Run) error { return s.watch(ctx, r) }

// until waits, polling, until cond holds, for at most wait.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not within %v", what, wait)
		}
	}
}

// A goroutine that outlives Watch, waiting in Send when Watch returns, is
// refused then: its notice never reaches C.
func TestSendWaitingWhenWatchReturnsIsRefused(t *testing.T) {
	logs := testlog.New()
	sendErr := make(chan error, 1)
	var n *termsig.Notifier
	made := make(chan struct{})
	src := &funcSource{name: "early", watch: func(ctx context.Context, r *termsig.Run) error {
		r.Ready()
		if err := r.Send(ctx, termsig.Notice{Kind: termsig.Maintenance}); err != nil { // fills C
			return err
		}
		go func() { sendErr <- r.Send(context.Background(), termsig.Notice{Kind: termsig.Terminate}) }()
		<-made
		until(t, "the second Send waiting", func() bool { return n.Status()[0].Notices == 2 })
		return nil // early, before Stop
	}}
	n = termsig.Config{Logger: logs.Logger(), Buffer: 1}.New(src)
	close(made)
	defer n.Stop()
	require.ErrorContains(t, <-sendErr, "Send after Watch returned")
	logs.WaitFor(t, "termsig: source sent a notice after its Watch returned; notice dropped", 1)
	assert.Equal(t, termsig.Maintenance, receive(t, n.C()).Kind)
	select {
	case nt := <-n.C():
		t.Fatalf("a notice of a Send refused reached C: %v", nt)
	default:
	}
	assert.Equal(t, 1, n.Status()[0].Notices)
}

// Sends racing Stop: no panic, no deadlock, every Send that returned nil
// put its notice on C, and Status counts just those.
func TestSendRacingStopDeliversWhatItAccepts(t *testing.T) {
	for i := range 200 {
		var ok atomic.Int64
		var watching atomic.Int32
		mk := func(name string) termsig.Source {
			return &funcSource{name: name, watch: func(ctx context.Context, r *termsig.Run) error {
				watching.Add(1)
				defer watching.Add(-1)
				r.Ready()
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						for ctx.Err() == nil {
							if r.Send(context.Background(), termsig.Notice{Kind: termsig.Reload}) == nil {
								ok.Add(1)
							}
						}
						if r.Send(ctx, termsig.Notice{Kind: termsig.Cleared}) == nil {
							ok.Add(1)
						}
					})
				}
				wg.Wait()
				return nil
			}}
		}
		n := termsig.Config{Logger: slog.New(slog.DiscardHandler), Buffer: 1 + i%5}.New(mk("a"), mk("b"))
		got := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range n.C() {
				got++
			}
		}()
		for range i % 3 * 100 { // Stop at varied moments
			runtime.Gosched()
		}
		n.Stop()
		require.Zero(t, watching.Load(), "Stop returned with a Watch running")
		<-done
		total := 0
		for _, s := range n.Status() {
			total += s.Notices
		}
		require.Equal(t, ok.Load(), int64(got), "run %d: notices received and Sends that returned nil", i)
		require.Equal(t, got, total, "run %d: notices received and counted", i)
	}
}

// A Send whose context is done delivers while C has room, and is refused
// (and not counted) while C is full.
func TestSendWithDoneContext(t *testing.T) {
	got := make(chan [2]error, 1)
	src := &funcSource{name: "s", watch: func(ctx context.Context, r *termsig.Run) error {
		r.Ready()
		dead, cancel := context.WithCancel(ctx)
		cancel()
		got <- [2]error{r.Send(dead, termsig.Notice{Kind: termsig.Reload}), r.Send(dead, termsig.Notice{Kind: termsig.Reload})}
		<-ctx.Done()
		return nil
	}}
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler), Buffer: 1}.New(src)
	defer n.Stop()
	errs := <-got
	assert.NoError(t, errs[0], "C had room")
	assert.ErrorIs(t, errs[1], context.Canceled, "C was full")
	assert.Equal(t, 1, n.Status()[0].Notices)
}

// A source still running when Shutdown gave up has its notice put in C's
// buffer while there is room, as during Stop.
func TestShutdownThatGaveUpStillTakesANoticeWhileCHasRoom(t *testing.T) {
	release := make(chan struct{})
	sent := make(chan error, 1)
	src := &funcSource{name: "stuck", watch: func(ctx context.Context, r *termsig.Run) error {
		r.Ready()
		<-ctx.Done()
		<-release // slow to stop
		sent <- r.Send(ctx, termsig.Notice{Kind: termsig.Terminate})
		return nil
	}}
	n := quiet().New(src)
	defer n.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var se *termsig.ShutdownError
	require.ErrorAs(t, n.Shutdown(ctx), &se)
	close(release)
	require.NoError(t, <-sent)
	nt, ok := <-n.C()
	require.True(t, ok)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	_, ok = <-n.C()
	assert.False(t, ok, "C is closed once the source returned")
}

// Status counts a Send that waits for room, and takes it back if it gives
// up.
func TestNoticesCountsASendWaitingForRoom(t *testing.T) {
	f := termsigtest.NewFake("f")
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler), Buffer: 1}.New(f)
	first := f.Send(termsig.Notice{Kind: termsig.Maintenance})
	second := f.Send(termsig.Notice{Kind: termsig.Terminate}) // waits: C is full
	closed(t, first, "the first notice on C")
	until(t, "both counted", func() bool { return n.Status()[0].Notices == 2 })
	assert.Len(t, n.C(), 1)
	n.Stop() // the waiting Send gives up: C is full
	assert.Equal(t, 1, n.Status()[0].Notices)
	notClosed(t, second, "the second notice, dropped at Stop")
}

// Shutdown may be called twice, and with Stop, while a source is stuck.
func TestShutdownConcurrentWithStop(t *testing.T) {
	release := make(chan struct{})
	src := &funcSource{name: "stuck", watch: func(ctx context.Context, r *termsig.Run) error {
		r.Ready()
		<-ctx.Done()
		<-release
		return nil
	}}
	n := quiet().New(src)
	stopped := make(chan struct{})
	go func() { n.Stop(); close(stopped) }()
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := n.Shutdown(ctx)
		cancel()
		var se *termsig.ShutdownError
		require.True(t, errors.As(err, &se), "Shutdown = %v with a stuck source", err)
	}
	notClosed(t, stopped, "Stop with a stuck source")
	close(release)
	<-stopped
	_, ok := <-n.C()
	assert.False(t, ok, "C is closed after Stop")
	assert.NoError(t, n.Shutdown(context.Background()))
}

func TestADeadlineRFC3339CannotWriteIsDroppedNotTheNotice(t *testing.T) {
	for _, s := range []string{"9999-12-31T23:59:59-23:59", "0000-01-01T00:00:00+01:00"} {
		t.Run(s, func(t *testing.T) {
			far, err := time.Parse(time.RFC3339, s)
			require.NoError(t, err, "RFC 3339 parses it")
			rec := testlog.New()
			f := termsigtest.NewFake("f")
			n := termsig.Config{Logger: rec.Logger()}.New(f)
			defer n.Stop()
			raw := `{"action":"terminate","time":"` + s + `"}`
			f.Send(termsig.Notice{Kind: termsig.Terminate, Deadline: far, Observed: far, Raw: raw})
			var nt termsig.Notice
			select {
			case nt = <-n.C():
			case <-time.After(wait):
				t.Fatal("the notice is lost")
			}
			assert.Equal(t, termsig.Terminate, nt.Kind)
			assert.True(t, nt.Deadline.IsZero(), "no deadline rather than one nobody can write")
			assert.WithinDuration(t, time.Now(), nt.Observed, wait, "a bad Observed is the time of delivery")
			assert.Equal(t, raw, nt.Raw, "what the server said is kept")
			_, err = json.Marshal(nt)
			assert.NoError(t, err)
			rec.WaitFor(t, "termsig: a notice's deadline is outside the years 0 to 9999 (UTC); the notice is sent without one", 1)
		})
	}
}

package fakefault_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/internal/fakefault"
)

const wait = 5 * time.Second

// fake is a server whose requests take faults from a Queue: a request
// with a fault reports that it arrived, applies the fault and reports the
// outcome; one that is not Handled, or has no fault, is answered "served".
type fake struct {
	q        fakefault.Queue[fakefault.Effects]
	url      string
	hc       *http.Client
	gone     chan struct{}
	goneOnce sync.Once
	arrived  chan struct{}
	outcome  chan fakefault.Outcome
}

func newFake(t *testing.T) *fake {
	f := &fake{
		gone:    make(chan struct{}),
		arrived: make(chan struct{}, 10),
		outcome: make(chan fakefault.Outcome, 10),
	}
	srv := httptest.NewServer(http.HandlerFunc(f.handle))
	tr := &http.Transport{}
	f.url, f.hc = srv.URL, &http.Client{Transport: tr}
	t.Cleanup(func() {
		f.leave() // releases held requests, so that Close does not wait on them
		srv.Close()
		tr.CloseIdleConnections()
	})
	return f
}

func (f *fake) handle(w http.ResponseWriter, r *http.Request) {
	e, cleared, ok := f.q.Take("key")
	if ok {
		f.arrived <- struct{}{}
		out := e.Apply(w, r, cleared, f.gone, answer)
		f.outcome <- out
		if out == fakefault.Handled {
			return
		}
	}
	_, _ = io.WriteString(w, "served")
}

// answer marks what it writes, to show that Apply answers through it.
func answer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Answered-By", "fault")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// leave closes gone, as a fake's Stop or Close does.
func (f *fake) leave() { f.goneOnce.Do(func() { close(f.gone) }) }

type result struct {
	status int
	body   string
	by     string // the Answered-By header
	err    error
}

func (f *fake) get(ctx context.Context) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		return result{err: err}
	}
	res, err := f.hc.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return result{status: res.StatusCode, body: string(b), by: res.Header.Get("Answered-By"), err: err}
}

func (f *fake) async(ctx context.Context) <-chan result {
	c := make(chan result, 1)
	go func() { c <- f.get(ctx) }()
	return c
}

func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(wait):
		t.Fatal("no " + what)
	}
	var zero T
	return zero
}

// What a request gets from effects that do not hold it for long.
func TestApplyAnswers(t *testing.T) {
	served := result{status: http.StatusOK, body: "served"}
	for _, tc := range []struct {
		name    string
		effects fakefault.Effects
		want    result // err: any error
		outcome fakefault.Outcome
	}{
		{"none", fakefault.Effects{}, served, fakefault.Passed},
		{"delay", fakefault.Effects{Delay: 20 * time.Millisecond}, served, fakefault.Passed},
		{"status, empty body as given", fakefault.Effects{Status: http.StatusServiceUnavailable},
			result{status: http.StatusServiceUnavailable, by: "fault"}, fakefault.Handled},
		{"body, status 200", fakefault.Effects{Body: "<html>"},
			result{status: http.StatusOK, body: "<html>", by: "fault"}, fakefault.Handled},
		{"status and body", fakefault.Effects{Status: http.StatusTooManyRequests, Body: "slow down"},
			result{status: http.StatusTooManyRequests, body: "slow down", by: "fault"}, fakefault.Handled},
		{"delay, then status", fakefault.Effects{Delay: 20 * time.Millisecond, Status: http.StatusBadGateway},
			result{status: http.StatusBadGateway, by: "fault"}, fakefault.Handled},
		{"drop before status", fakefault.Effects{Drop: true, Status: http.StatusOK}, result{err: io.EOF}, fakefault.Handled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.q.Add("", 1, tc.effects)
			start := time.Now()
			got := f.get(context.Background())
			assert.GreaterOrEqual(t, time.Since(start), tc.effects.Delay)
			if tc.want.err != nil {
				assert.Error(t, got.err, "no answer")
			} else {
				assert.Equal(t, tc.want, got)
			}
			assert.Equal(t, tc.outcome, recv(t, f.outcome, "outcome"))
			assert.Equal(t, served, f.get(context.Background()), "the fault is used up")
		})
	}
}

// A request that Hang or Delay holds is let go by Clear (Hang only: then
// it is served), by gone being closed (its connection closed), and by its
// client giving up.
func TestApplyHeld(t *testing.T) {
	hang, delay := fakefault.Effects{Hang: true, Status: http.StatusTeapot}, fakefault.Effects{Delay: time.Hour}
	for _, tc := range []struct {
		name    string
		effects fakefault.Effects
		release func(f *fake, cancel context.CancelFunc)
		served  bool // else the client sees an error
		outcome fakefault.Outcome
	}{
		{"hang, Clear", hang, func(f *fake, _ context.CancelFunc) { f.q.Clear() }, true, fakefault.Released},
		{"hang, gone", hang, func(f *fake, _ context.CancelFunc) { f.leave() }, false, fakefault.Handled},
		{"hang, client gives up", hang, func(_ *fake, cancel context.CancelFunc) { cancel() }, false, fakefault.Handled},
		{"delay, gone", delay, func(f *fake, _ context.CancelFunc) { f.leave() }, false, fakefault.Handled},
		{"delay, client gives up", delay, func(_ *fake, cancel context.CancelFunc) { cancel() }, false, fakefault.Handled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.q.Add("", 0, tc.effects)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := f.async(ctx)
			recv(t, f.arrived, "request")
			select {
			case r := <-got:
				t.Fatalf("a held request was answered: %+v", r)
			default:
			}
			tc.release(f, cancel)
			r := recv(t, got, "answer")
			if tc.served {
				assert.Equal(t, result{status: http.StatusOK, body: "served"}, r, "served as without a fault")
			} else {
				assert.Error(t, r.err)
			}
			assert.Equal(t, tc.outcome, recv(t, f.outcome, "outcome"))
		})
	}
}

// A delay goes on to the rest when Clear comes: Clear releases hangs only.
func TestApplyDelayOutlastsClear(t *testing.T) {
	f := newFake(t)
	f.q.Add("", 1, fakefault.Effects{Delay: 50 * time.Millisecond, Body: "late"})
	start := time.Now()
	got := f.async(context.Background())
	recv(t, f.arrived, "request")
	f.q.Clear()
	r := recv(t, got, "answer")
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	assert.Equal(t, result{status: http.StatusOK, body: "late", by: "fault"}, r)
}

func TestHangUp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fakefault.HangUp(w)
		fakefault.HangUp(w) // already hijacked: nothing more to do
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	_, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.Error(t, err, "no answer")

	assert.PanicsWithValue(t, "termsig: fakefault: the ResponseWriter cannot be hijacked", func() {
		fakefault.HangUp(httptest.NewRecorder())
	})
}

// BodySize streams that many bytes, without a Content-Length, in place of
// Body; an endless one streams until the client stops reading or gone is
// closed.
func TestApplyBodySize(t *testing.T) {
	t.Run("sized", func(t *testing.T) {
		f := newFake(t)
		f.q.Add("", 1, fakefault.Effects{Status: http.StatusNotFound, Body: "not this", BodySize: 3<<20 + 5})
		res, err := f.hc.Get(f.url)
		require.NoError(t, err)
		defer res.Body.Close()
		assert.Equal(t, http.StatusNotFound, res.StatusCode)
		assert.Equal(t, int64(-1), res.ContentLength, "streamed, no Content-Length")
		n, err := io.Copy(io.Discard, res.Body)
		require.NoError(t, err)
		assert.Equal(t, int64(3<<20+5), n)
		assert.Equal(t, fakefault.Handled, recv(t, f.outcome, "outcome"))
	})
	t.Run("endless, client gives up", func(t *testing.T) {
		f := newFake(t)
		f.q.Add("", 1, fakefault.Effects{BodySize: fakefault.EndlessBody})
		res := endless(t, f)
		res.Body.Close()
		assert.Equal(t, fakefault.Handled, recv(t, f.outcome, "outcome"))
	})
	t.Run("endless, gone", func(t *testing.T) {
		f := newFake(t)
		f.q.Add("", 1, fakefault.Effects{BodySize: fakefault.EndlessBody})
		res := endless(t, f)
		defer res.Body.Close()
		rest := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, res.Body) // a client that goes on reading
			rest <- err
		}()
		f.leave()
		assert.Equal(t, fakefault.Handled, recv(t, f.outcome, "outcome"))
		assert.Error(t, recv(t, rest, "end of the body"), "cut off, not complete")
	})
}

// endless requests an endless body from f and reads 8 MiB of it.
func endless(t *testing.T, f *fake) *http.Response {
	t.Helper()
	res, err := f.hc.Get(f.url)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	n, err := io.CopyN(io.Discard, res.Body, 8<<20)
	require.NoError(t, err)
	assert.Equal(t, int64(8<<20), n, "more than any answer")
	return res
}

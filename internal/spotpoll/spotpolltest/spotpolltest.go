// Package spotpolltest has what the tests of the sources built on package
// spotpoll (alibaba, tencent) share: a server that redirects, a measure of
// allocations, a fake host's DMI, the checks that Stop is prompt, and the
// detection latency trials.
package spotpolltest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/httpguard"
	"github.com/termsig/termsig/internal/httpguard/guardtest"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/termsigtest"
)

// A Redirector is a server that answers every request with a redirect to
// the same path on another server, and counts them.
type Redirector struct {
	*httptest.Server

	mu      sync.Mutex
	n       int
	changed chan struct{} // closed and replaced on every request
}

// NewRedirector starts a Redirector that redirects with code to the server
// at the base URL to; it closes when the test ends.
func NewRedirector(t testing.TB, code int, to string) *Redirector {
	r := &Redirector{changed: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.n++
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
		http.Redirect(w, req, to+req.URL.Path, code)
	}))
	t.Cleanup(r.Close)
	return r
}

// Wait waits, at most wait, until the Redirector has had k requests.
func (r *Redirector) Wait(t testing.TB, k int, wait time.Duration) {
	t.Helper()
	timeout := time.After(wait)
	for {
		r.mu.Lock()
		n, ch := r.n, r.changed
		r.mu.Unlock()
		if n >= k {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("the redirector had %d requests, want %d", n, k)
		}
	}
}

// Allocated returns how many bytes the process allocated while f ran: an
// upper bound of how much the heap grew meanwhile, peaks included, which
// sampling the heap could miss.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FakeRoot returns a directory laid out like / with the given DMI files
// (such as "product_name") under sys/class/dmi/id.
func FakeRoot(t testing.TB, dmi map[string]string) string {
	root := t.TempDir()
	dir := filepath.Join(root, "sys/class/dmi/id")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range dmi {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A Fake is what these checks need of a fake metadata service.
type Fake interface {
	SetTerminationTime(time.Time)
	ClearTerminationTime()
	Requests(key string) int
	AwaitRequests(ctx context.Context, key string, n int) error
	Inject(termsigtest.Fault)
	InFlight() int
	Served() <-chan struct{}
	Close()
}

// quiet is the Config of the Notifiers of these checks.
var quiet = termsig.Config{Logger: slog.New(slog.DiscardHandler)}

// StopIsPrompt checks that Stop returns within 100 ms while a request
// hangs and while an endless answer streams, against the fake that
// newFake returns with its URL, for the source that newSource returns for
// an endpoint (with timeouts long enough not to end the request).
func StopIsPrompt(t *testing.T, newFake func() (Fake, string), newSource func(endpoint string) termsig.Source) {
	for _, f := range []termsigtest.Fault{{Hang: true}, {BodySize: termsigtest.EndlessBody}} {
		timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
			srv, url := newFake()
			defer srv.Close()
			srv.Inject(f)
			n := quiet.New(newSource(url))
			defer n.Stop()
			timeout := time.After(5 * time.Second)
			for srv.InFlight() == 0 {
				select {
				case <-srv.Served():
				case <-timeout:
					t.Fatal("no request")
				}
			}
			start := time.Now()
			n.Stop()
			return time.Since(start)
		})
	}
}

// StopEndsDNSLookups checks that, with a DNS server that never answers,
// Stop returns at once and leaves no lookup behind, for the source that
// newSource returns with an endpoint that is a name and its lookups
// dialled by dial. It skips the test where the system's resolver looks up
// (see guardtest.SilentDNS).
func StopEndsDNSLookups(t *testing.T, newSource func(endpoint string, dial httpguard.DialFunc) termsig.Source) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		dial, queried := guardtest.SilentDNS(t, 5*time.Second)
		n := quiet.New(newSource("http://metadata.termsig.test", dial))
		defer n.Stop()
		queried()
		start := time.Now()
		n.Stop()
		return time.Since(start)
	})
}

// Latency measures, over trials trials, the time from the moment a fake
// starts answering a termination time (lead ahead) to the notice on
// Notifier.C, for a source that polls key every interval. The times appear
// at phases spread evenly over the polling cycle (stratified), so that the
// mean is not at the mercy of a few random draws. Workers run trials side
// by side, each with the fake and the Notifier that start returns, to keep
// the wall time down; the CPU is nearly idle throughout.
func Latency(b *testing.B, interval time.Duration, trials, workers int, key string, lead time.Duration, start func() (Fake, *termsig.Notifier)) []time.Duration {
	var (
		mu  sync.Mutex
		lat []time.Duration
		wg  sync.WaitGroup
	)
	per := (trials + workers - 1) / workers
	for w := range workers {
		wg.Go(func() {
			srv, n := start()
			defer srv.Close()
			defer n.Stop()
			for i := range per {
				// Just after a poll, so that the sleep sets the phase of
				// the change in the polling cycle.
				if err := answered(srv, key); err != nil {
					b.Error(err)
					return
				}
				time.Sleep(time.Duration((float64(i*workers+w) + 0.5) / float64(per*workers) * float64(interval)))
				set := time.Now()
				srv.SetTerminationTime(set.Add(lead))
				if err := next(n, termsig.Terminate, interval); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(set)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				// Gone again, so that the next trial is news.
				srv.ClearTerminationTime()
				if err := next(n, termsig.Cleared, interval); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(lat) == 0 {
		b.Fatal("no trial completed")
	}
	return lat
}

// answered waits until srv has answered one more request for key.
func answered(srv Fake, key string) error {
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Minute, fmt.Errorf("%s not polled", key))
	defer cancel()
	return srv.AwaitRequests(ctx, key, srv.Requests(key)+1)
}

// next waits for a notice of kind on n.C, at most interval and a minute.
func next(n *termsig.Notifier, kind termsig.Kind, interval time.Duration) error {
	select {
	case nt := <-n.C():
		if nt.Kind != kind {
			return fmt.Errorf("got %v, want a %v notice", nt, kind)
		}
		return nil
	case <-time.After(interval + time.Minute):
		return fmt.Errorf("no %v notice", kind)
	}
}

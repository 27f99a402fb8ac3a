package azure_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/internal/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds how long a test waits for something that should happen
// quickly; a pass takes far less. It is long so that a loaded -race run
// does not fail.
const wait = 5 * time.Second

// What the Notifier logs when the source reports an error, and when it
// reports itself healthy again: the source does not log its health.
const (
	failing = "termsig: source error, retrying"
	healthy = "termsig: source healthy again"
)

// notBefore is a NotBefore in whole seconds, as the document carries it,
// a few minutes ahead as Azure gives it: one long past or far ahead is no
// deadline.
var notBefore = time.Now().UTC().Add(10 * time.Minute).Truncate(time.Second)

// quick returns a Config without an Endpoint (start sets the fake's)
// that polls at FloorInterval and backs off for at most 40 ms, so that
// tests see many polls quickly. The timeouts are long enough that a loaded
// machine does not time a healthy request out; tests of timeouts set
// their own.
func quick() azure.Config {
	return azure.Config{
		Interval:            azure.FloorInterval,
		RequestTimeout:      time.Second,
		FirstRequestTimeout: time.Second,
		MaxBackoff:          40 * time.Millisecond,
	}
}

// fast returns quick with srv as the endpoint.
func fast(srv *azuretest.Server) azure.Config {
	c := quick()
	c.Endpoint = srv.URL
	return c
}

// A harness runs one azure Source under a Notifier against a fake.
type harness struct {
	t    *testing.T
	srv  *azuretest.Server
	src  *azure.Source
	n    *termsig.Notifier
	logs *testlog.Recorder // the Notifier's: health changes, notices
	own  *testlog.Recorder // the source's Config.Logger
}

// options of start; the zero value is a fast source against a new fake.
type options struct {
	cfg     *azure.Config           // nil: quick(); an empty Endpoint is set to the fake's
	prepare func(*azuretest.Server) // sets the fake up before the source starts
	buffer  int                     // the Notifier's Config.Buffer
	// endpoint, if set, gives the Endpoint from the fake, such as a
	// server in front of it.
	endpoint func(*azuretest.Server) string
}

// start runs a source against a new fake, configured by quick unless o.cfg
// is set. The Notifier stops, then the fake closes, when the test ends.
func start(t *testing.T, o options) *harness {
	t.Helper()
	srv := azuretest.NewServer()
	t.Cleanup(srv.Close) // after the Notifier's Stop: cleanups run last-in first-out
	if o.prepare != nil {
		o.prepare(srv)
	}
	cfg := quick()
	if o.cfg != nil {
		cfg = *o.cfg
	}
	switch {
	case o.endpoint != nil:
		cfg.Endpoint = o.endpoint(srv)
	case cfg.Endpoint == "":
		cfg.Endpoint = srv.URL
	}
	own := testlog.New()
	if cfg.Logger == nil {
		cfg.Logger = own.Logger()
	}
	logs := testlog.New()
	src := azure.New(cfg)
	nc := termsig.Config{Logger: logs.Logger(), Buffer: o.buffer}
	n := nc.New(src)
	t.Cleanup(n.Stop)
	return &harness{t: t, srv: srv, src: src, n: n, logs: logs, own: own}
}

// receive returns the next notice, failing the test if none comes.
func (h *harness) receive() termsig.Notice {
	h.t.Helper()
	return receive(h.t, h.n)
}

func receive(t testing.TB, n *termsig.Notifier) termsig.Notice {
	t.Helper()
	select {
	case nt, ok := <-n.C():
		require.True(t, ok, "C closed")
		return nt
	case <-time.After(wait):
		t.Fatal("no notice")
	}
	return termsig.Notice{}
}

// polls waits until the fake has answered k more requests for path: the
// source has seen the document as it is now at least k-1 times, and
// handed over what those looks called for.
func (h *harness) polls(path string, k int) {
	h.t.Helper()
	target := h.srv.Requests(path) + k
	await(h.t, h.srv, fmt.Sprintf("%d more requests for %s", k, path), func() bool {
		return h.srv.Requests(path) >= target
	})
}

// quiet checks that no notice is waiting: call it after polls.
func (h *harness) quiet() {
	h.t.Helper()
	select {
	case nt := <-h.n.C():
		h.t.Fatalf("unexpected notice: %v", nt)
	default:
	}
}

// stopAndDrain stops the Notifier and returns every notice left on C:
// after Stop nothing more can arrive, so this is how a test shows that
// no other notice was sent.
func (h *harness) stopAndDrain() []termsig.Notice {
	h.n.Stop()
	var rest []termsig.Notice
	for nt := range h.n.C() {
		rest = append(rest, nt)
	}
	return rest
}

// status returns the source's status.
func (h *harness) status() termsig.SourceStatus {
	st := h.n.Status()
	require.Len(h.t, st, 1)
	return st[0]
}

// failure waits for the Notifier to log a failing source, and returns
// the error it logged.
func (h *harness) failure() string {
	h.t.Helper()
	return testlog.Attr(h.logs.WaitFor(h.t, failing, 1), "err")
}

// recovered waits until the last health change the Notifier logged is
// "healthy again".
func (h *harness) recovered() {
	h.t.Helper()
	h.logs.WaitUntil(h.t, "recovery", func(all []slog.Record) bool {
		last := ""
		for _, r := range all {
			if r.Message == failing || r.Message == healthy {
				last = r.Message
			}
		}
		return last == healthy
	})
}

// recovers checks that after a fault the source works again: healthy,
// and an event added now is reported (the fake's other events stay).
func (h *harness) recovers() {
	h.t.Helper()
	h.recovered()
	id := "recovery-" + strconv.Itoa(h.srv.Incarnation())
	h.srv.SetEvents(append(h.srv.Events(), azuretest.Event{EventID: id, EventType: "Preempt", NotBefore: notBefore})...)
	nt := h.receive()
	assert.Equal(h.t, id, nt.Event)
	assert.Equal(h.t, termsig.Terminate, nt.Kind)
	assert.NoError(h.t, h.status().Err)
	assert.Equal(h.t, termsig.StateRunning, h.status().State)
}

// await waits until cond holds, looking again whenever the fake takes or
// answers a request.
func await(t testing.TB, srv *azuretest.Server, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(wait)
	for {
		served := srv.Served()
		if cond() {
			return
		}
		select {
		case <-served:
		case <-timeout:
			t.Fatal("waited in vain for " + what)
		}
	}
}

// inFlight waits until the fake is answering at least k requests.
func inFlight(t testing.TB, srv *azuretest.Server, k int) {
	t.Helper()
	await(t, srv, strconv.Itoa(k)+" requests in flight", func() bool { return srv.InFlight() >= k })
}

// awaitReady waits for n.Ready.
func awaitReady(t testing.TB, n *termsig.Notifier) {
	t.Helper()
	select {
	case <-n.Ready():
	case <-time.After(wait):
		t.Fatal("Notifier.Ready not closed")
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// doc returns a scheduled-events document with incarnation inc and the
// events given as JSON objects.
func doc(inc int, events ...string) string {
	return `{"DocumentIncarnation":` + strconv.Itoa(inc) + `,"Events":[` + strings.Join(events, ",") + `]}`
}

// event returns one event of a document as JSON, for the VM "test-vm".
func event(id, typ, status, notBefore string) string {
	return `{"EventId":"` + id + `","EventType":"` + typ + `","ResourceType":"VirtualMachine","Resources":["test-vm"],` +
		`"EventStatus":"` + status + `","NotBefore":"` + notBefore + `","Description":"","EventSource":"Platform","DurationInSeconds":-1}`
}

// events lists notices briefly, for assertion messages.
func events(nts []termsig.Notice) []string {
	var out []string
	for _, nt := range nts {
		out = append(out, nt.Kind.String()+" "+nt.Event)
	}
	return out
}

// countingTransport counts the requests it carries and signals each on
// seen, then hands them to a transport of its own.
type countingTransport struct {
	tr *http.Transport

	mu    sync.Mutex
	reqs  []string // method and path of each request
	times []time.Time
	seen  chan struct{} // closed and replaced on every request
}

func newCountingTransport(t *testing.T) *countingTransport {
	ct := &countingTransport{tr: &http.Transport{}, seen: make(chan struct{})}
	t.Cleanup(ct.tr.CloseIdleConnections)
	return ct
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r.Method+" "+r.URL.Path)
	c.times = append(c.times, time.Now())
	close(c.seen)
	c.seen = make(chan struct{})
	c.mu.Unlock()
	return c.tr.RoundTrip(r)
}

func (c *countingTransport) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.reqs...)
}

// waitRequests waits until the transport has carried k requests and
// returns their start times.
func (c *countingTransport) waitRequests(t testing.TB, k int) []time.Time {
	t.Helper()
	timeout := time.After(wait)
	for {
		c.mu.Lock()
		n, ch := len(c.reqs), c.seen
		times := append([]time.Time(nil), c.times...)
		c.mu.Unlock()
		if n >= k {
			return times
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%d requests, want %d", n, k)
		}
	}
}

// background returns a context that ends after wait, and its cancel.
func background() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), wait)
}

// recordText prints a log record as its message and attributes.
func recordText(r slog.Record) string {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	return line
}

// messages lists the records printed by recordText.
func messages(recs []slog.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, recordText(r))
	}
	return out
}

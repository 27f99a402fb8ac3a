package webhook

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A receiver is a webhook endpoint on loopback that answers each POST with
// the next status of its script (200 once the script is done), or hangs.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	script   []int
	hang     chan struct{} // closed to release hanging requests; nil: no hang
	bodies   []string
	headers  []http.Header
	requests int
	got      chan struct{} // a request arrived
}

func newReceiver(t *testing.T, script ...int) *receiver {
	r := &receiver{script: script, got: make(chan struct{}, 1000)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests++
		r.bodies = append(r.bodies, string(body))
		r.headers = append(r.headers, req.Header.Clone())
		status := http.StatusOK
		if len(r.script) > 0 {
			status, r.script = r.script[0], r.script[1:]
		}
		hang := r.hang
		r.mu.Unlock()
		r.got <- struct{}{}
		if hang != nil {
			select {
			case <-hang:
			case <-req.Context().Done():
			}
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

// results records what OnResult is told.
type results struct {
	mu  sync.Mutex
	got []string
	c   chan string
}

func newResults() *results { return &results{c: make(chan string, 1000)} }

func (r *results) add(s string) {
	r.mu.Lock()
	r.got = append(r.got, s)
	r.mu.Unlock()
	r.c <- s
}

func (r *results) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-r.c:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no result within 10 s")
	}
	return ""
}

func newSender(t *testing.T, cfg Config, res *results) *Sender {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.OnResult = res.add
	cfg.backoffBase = 5 * time.Millisecond
	s, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

var spot = termsig.Notice{Source: "imds", Kind: termsig.Terminate, Event: "spot/instance-action", Reason: "spot interruption: terminate",
	Observed: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Deadline: time.Now().Add(time.Hour)}

// The default body is a Slack message: {"text": ...} with the program, the
// outcome and the notice, as valid JSON whatever the notice's text holds.
func TestEventIsPostedAsASlackMessage(t *testing.T) {
	rcv := newReceiver(t)
	res := newResults()
	s := newSender(t, Config{URL: rcv.URL, Headers: http.Header{"Authorization": {"Bearer x"}}}, res)
	nt := spot
	nt.Reason = `quotes " and \ and newlines` + "\n"
	s.Send(Event{Program: "kubedrain", Outcome: "drained", Notice: nt})
	assert.Equal(t, ResultSent, res.next(t))
	var msg struct{ Text string }
	require.NoError(t, json.Unmarshal([]byte(rcv.bodies[0]), &msg), rcv.bodies[0])
	assert.Equal(t, "kubedrain: drained: "+nt.String(), msg.Text)
	assert.Equal(t, "application/json", rcv.headers[0].Get("Content-Type"))
	assert.Equal(t, "Bearer x", rcv.headers[0].Get("Authorization"))
}

// A template sees the event's fields.
func TestTemplateSeesTheEvent(t *testing.T) {
	rcv := newReceiver(t)
	res := newResults()
	s := newSender(t, Config{URL: rcv.URL, Template: `{"node": {{ index .Fields "node" | json }}, "source": {{ .Notice.Source | json }}}`}, res)
	s.Send(Event{Notice: spot, Fields: map[string]string{"node": "ip-10-0-0-1"}})
	assert.Equal(t, ResultSent, res.next(t))
	assert.JSONEq(t, `{"node": "ip-10-0-0-1", "source": "imds"}`, rcv.bodies[0])
}

// 503s and 429s are tried again until the endpoint takes the event; a 400
// is not.
func TestFailuresAreTriedAgainButNotClientErrors(t *testing.T) {
	rcv := newReceiver(t, 503, 429, 502, 200, 400)
	res := newResults()
	s := newSender(t, Config{URL: rcv.URL}, res)
	s.Send(Event{Notice: spot})
	assert.Equal(t, ResultSent, res.next(t))
	assert.Equal(t, 4, rcv.requests)
	s.Send(Event{Notice: spot})
	assert.Equal(t, ResultFailed, res.next(t))
	assert.Equal(t, 5, rcv.requests, "a 400 was tried again")
}

// Retries end at the notice's deadline.
func TestRetriesEndAtTheNoticesDeadline(t *testing.T) {
	script := make([]int, 10000)
	for i := range script {
		script[i] = 503
	}
	rcv := newReceiver(t, script...)
	res := newResults()
	s := newSender(t, Config{URL: rcv.URL}, res)
	nt := spot
	nt.Deadline = time.Now().Add(300 * time.Millisecond)
	s.Send(Event{Notice: nt})
	assert.Equal(t, ResultFailed, res.next(t))
	assert.WithinDuration(t, nt.Deadline, time.Now(), 250*time.Millisecond)
}

// Send never waits, whatever the endpoint does: with one that hangs,
// events beyond the queue drop the oldest, and Close gives up at its ctx.
func TestSendNeverWaits(t *testing.T) {
	rcv := newReceiver(t)
	rcv.hang = make(chan struct{})
	defer close(rcv.hang)
	res := newResults()
	s := newSender(t, Config{URL: rcv.URL}, res)
	s.Send(Event{Notice: spot})
	<-rcv.got // the first is being posted, and hangs
	begin := time.Now()
	for range QueueSize + 10 {
		s.Send(Event{Notice: spot})
	}
	assert.Less(t, time.Since(begin), 100*time.Millisecond)
	for range 10 {
		assert.Equal(t, ResultDropped, res.next(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, s.Close(ctx), context.DeadlineExceeded)
	s.Send(Event{Notice: spot})
	res.mu.Lock()
	defer res.mu.Unlock()
	assert.Len(t, res.got, 10+1+QueueSize+1, "every event has a result: the one abandoned, those queued, the one after Close")
}

// Close waits for what is queued.
func TestCloseDeliversWhatIsQueued(t *testing.T) {
	rcv := newReceiver(t)
	res := newResults()
	s := newSender(t, Config{URL: rcv.URL}, res)
	for range 5 {
		s.Send(Event{Notice: spot})
	}
	require.NoError(t, s.Close(context.Background()))
	assert.Equal(t, 5, rcv.requests)
}

// The URL can come from a file (a Secret); a Config that cannot work is an
// error from New that does not repeat the URL.
func TestConfig(t *testing.T) {
	rcv := newReceiver(t)
	file := filepath.Join(t.TempDir(), "url")
	require.NoError(t, os.WriteFile(file, []byte(rcv.URL+"\n"), 0o600))
	res := newResults()
	s := newSender(t, Config{URLFile: file}, res)
	s.Send(Event{Notice: spot})
	assert.Equal(t, ResultSent, res.next(t))

	for name, cfg := range map[string]Config{
		"no URL":       {},
		"not http":     {URL: "ftp://secret@example.com/hook"},
		"no host":      {URL: "https:///hook"},
		"bad template": {URL: rcv.URL, Template: "{{ .Nope"},
		"no file":      {URLFile: filepath.Join(t.TempDir(), "missing")},
	} {
		_, err := New(cfg)
		assert.Error(t, err, name)
		if err != nil {
			assert.NotContains(t, err.Error(), "secret", name)
		}
	}
}

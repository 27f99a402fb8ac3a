// Package webhook posts what a termsig program sees and does to an HTTP
// endpoint, such as a Slack incoming webhook: one POST per [Event], its
// body a Go text/template over the Event (a Slack-compatible
// {"text": "..."} by default).
//
// Send never waits: events are queued (at most [QueueSize]; beyond that
// the oldest is dropped) and posted in order by one goroutine. A failed
// POST (a transport error, a 429 or a 5xx) is tried again with backoff
// until it is taken or the event's notice's deadline comes (or
// [Config.MaxRetryFor] passes, for a notice without one); a 4xx other
// than 429 is not tried again. Each outcome is logged on failure and
// counted through [Config.OnResult]; nothing here panics or stops the
// program. The proxy comes from the environment (HTTPS_PROXY, NO_PROXY).
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
)

// QueueSize bounds the events waiting to be posted.
const QueueSize = 64

// DefaultTemplate is the body of a POST when Config.Template is empty: a
// message that Slack, Mattermost and Microsoft Teams' incoming webhooks
// take.
const DefaultTemplate = `{"text": {{ .Text | json }}}`

// The results that Config.OnResult is told.
const (
	ResultSent    = "sent"    // the endpoint took it (2xx)
	ResultFailed  = "failed"  // given up: a 4xx, or no success before the deadline
	ResultDropped = "dropped" // the queue was full, or the Sender was closed first
)

// An Event is one thing to tell: a notice, or what the program did about
// one (its Outcome). The template sees its fields.
type Event struct {
	Program string            // the program's name, such as "kubedrain"
	Notice  termsig.Notice    // the notice it is about
	Outcome string            // what the program did, such as "drained"; "" for the notice itself
	Fields  map[string]string // more about it, such as the node ("node") and the pods left
}

// Text is the event as one line: the program, the outcome, the notice,
// then the fields in key order ("kubedrain: drained: ... (node=n1)").
func (e Event) Text() string {
	var b strings.Builder
	if e.Program != "" {
		b.WriteString(e.Program + ": ")
	}
	if e.Outcome != "" {
		b.WriteString(e.Outcome + ": ")
	}
	b.WriteString(e.Notice.String())
	for i, k := range slices.Sorted(maps.Keys(e.Fields)) {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(k + "=" + e.Fields[k])
	}
	if len(e.Fields) > 0 {
		b.WriteString(")")
	}
	return b.String()
}

// Config configures a [Sender].
type Config struct {
	// URL is where events are posted: an http or https URL. URLFile, if
	// set, is a file holding it (a Secret mounted in a pod), read once by
	// New; one of the two is required.
	URL     string
	URLFile string

	// Template is a text/template over an Event, whose output is the
	// body; it has a func "json" that writes a value as JSON. Empty means
	// DefaultTemplate.
	Template string

	// Headers are sent with each POST, such as "Authorization: Bearer x".
	// Content-Type is application/json unless they set it.
	Headers http.Header

	// Client sends the POSTs. Nil means a client with the environment's
	// proxy and a 10 s timeout per attempt.
	Client *http.Client

	// MaxRetryFor bounds the retries of an event whose notice has no
	// deadline. Zero means 2 minutes.
	MaxRetryFor time.Duration

	// Logger receives a line per event given up or dropped. Nil means
	// slog.Default().
	Logger *slog.Logger

	// OnResult, if set, is told each event's result (ResultSent, ...):
	// for a metric. It must not block.
	OnResult func(result string)

	// backoffBase is the first wait before an attempt is made again;
	// zero means 500 ms. Tests shorten it.
	backoffBase time.Duration
}

// A Sender posts events. Create it with New and Close it when done.
type Sender struct {
	cfg  Config
	url  string
	tmpl *template.Template

	mu     sync.Mutex
	queue  []Event
	closed bool
	wake   chan struct{}
	done   chan struct{}
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
}

// New returns a Sender for cfg, or an error saying what in cfg cannot
// work (no URL, a URL that is not http or https, a template that does not
// parse, an unreadable URLFile).
func New(cfg Config) (*Sender, error) {
	u := strings.TrimSpace(cfg.URL)
	if cfg.URLFile != "" {
		b, err := os.ReadFile(cfg.URLFile)
		if err != nil {
			return nil, fmt.Errorf("webhook: the URL file: %w", err)
		}
		u = strings.TrimSpace(string(b))
	}
	if u == "" {
		return nil, errors.New("webhook: no URL")
	}
	if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		// The URL may hold a secret: it is not repeated.
		return nil, errors.New("webhook: the URL is not an http or https URL with a host")
	}
	tmpl, err := template.New("webhook").Funcs(template.FuncMap{"json": jsonValue}).Parse(cmp.Or(cfg.Template, DefaultTemplate))
	if err != nil {
		return nil, fmt.Errorf("webhook: the template: %w", err)
	}
	if cfg.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = http.ProxyFromEnvironment
		cfg.Client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	cfg.MaxRetryFor = cmp.Or(cfg.MaxRetryFor, 2*time.Minute)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.backoffBase = cmp.Or(cfg.backoffBase, 500*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sender{cfg: cfg, url: u, tmpl: tmpl, wake: make(chan struct{}, 1), done: make(chan struct{}), ctx: ctx, cancel: cancel}
	go s.run()
	return s, nil
}

// jsonValue writes v as JSON, for the template.
func jsonValue(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// Send queues e and returns at once. When the queue is full the oldest
// event is dropped; after Close, e is.
func (s *Sender) Send(e Event) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.result(ResultDropped, e, errors.New("the sender is closed"))
		return
	}
	var dropped *Event
	if len(s.queue) == QueueSize {
		dropped = &s.queue[0]
		s.queue = s.queue[1:]
	}
	s.queue = append(s.queue, e)
	s.mu.Unlock()
	if dropped != nil {
		s.result(ResultDropped, *dropped, errors.New("too many events waiting"))
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close stops taking events and waits for those queued to be posted,
// until ctx is done; then the one being posted is abandoned and the rest
// dropped.
func (s *Sender) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		s.cancel()
		<-s.done
		return ctx.Err()
	}
}

func (s *Sender) run() {
	defer close(s.done)
	defer s.cancel()
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			select {
			case <-s.wake:
			case <-s.ctx.Done():
			}
			if s.ctx.Err() != nil {
				s.dropAll()
				return
			}
			continue
		}
		e := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		s.post(e)
		if s.ctx.Err() != nil {
			s.dropAll()
			return
		}
	}
}

// dropAll drops the events still queued.
func (s *Sender) dropAll() {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, e := range q {
		s.result(ResultDropped, e, errors.New("the sender was closed"))
	}
}

// post posts e, trying again until its deadline.
func (s *Sender) post(e Event) {
	var body bytes.Buffer
	if err := s.tmpl.Execute(&body, e); err != nil {
		s.result(ResultFailed, e, fmt.Errorf("the template: %w", err))
		return
	}
	end := e.Notice.Deadline
	if limit := time.Now().Add(s.cfg.MaxRetryFor); end.IsZero() || end.After(limit) {
		end = limit
	}
	ctx, cancel := context.WithDeadline(s.ctx, end)
	defer cancel()
	b := backoff.Backoff{Base: s.cfg.backoffBase, Max: 30 * time.Second, Jitter: true}
	for {
		retry, err := s.attempt(ctx, body.Bytes())
		if err == nil {
			s.result(ResultSent, e, nil)
			return
		}
		if !retry || !backoff.Sleep(ctx, b.Next()) {
			s.result(ResultFailed, e, err)
			return
		}
	}
}

// attempt makes one POST, and says whether a failure is worth another.
func (s *Sender) attempt(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	for k, vs := range s.cfg.Headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		// The error names the URL, which may hold a secret: only its kind.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return false, fmt.Errorf("HTTP %d", resp.StatusCode)
}

// result counts and, for a failure, logs what became of e.
func (s *Sender) result(result string, e Event, err error) {
	if s.cfg.OnResult != nil {
		s.cfg.OnResult(result)
	}
	if err != nil {
		s.cfg.Logger.Warn("webhook: event not delivered", "result", result, "err", err, "event", e.Text())
	}
}

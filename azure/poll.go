package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
	"github.com/termsig/termsig/internal/health"
	"github.com/termsig/termsig/internal/httpguard"
)

// The parts of the source's health (see internal/health).
const (
	partService = iota // the requests and the answers' shape
	partContent        // what the events say (unknown types, bad times)
	parts
)

// A watcher is one Watch.
type watcher struct {
	s      *Source
	cfg    Config // with the defaults applied
	log    *slog.Logger
	base   string // the endpoint, without a trailing slash
	hc     *http.Client
	tr     *http.Transport // the source's own, closed at the end; nil for the caller's
	r      *termsig.Run
	health *health.Parts

	vm          string            // this VM's name
	seen        map[string]string // EventId → EventType|NotBefore of the notices this Watch sent
	answered    bool              // the scheduled events answered once: RequestTimeout from now on
	incarnation int64             // of the last document acted on
	acted       bool              // a document was acted on
}

func (s *Source) newWatcher(r *termsig.Run) *watcher {
	c := s.cfg.withDefaults()
	w := &watcher{s: s, cfg: c, log: c.Logger, base: c.base(), r: r, vm: c.VMName, seen: map[string]string{},
		health: health.New(r, parts)}
	w.hc = c.HTTPClient
	if w.hc == nil {
		w.tr = httpguard.NewTransport(2*time.Second, 1, c.dnsDial)
		w.hc = &http.Client{Transport: w.tr}
	}
	w.hc = httpguard.Guard(w.hc, maxBody)
	return w
}

func (w *watcher) close() {
	if w.tr != nil {
		w.tr.CloseIdleConnections()
	}
}

// run learns the VM's name, then polls the scheduled events until ctx is
// done. Requests are spaced by Interval, start to start, and after a
// failure by a backoff that doubles up to MaxBackoff.
func (w *watcher) run(ctx context.Context) {
	bo := backoff.Backoff{Base: w.cfg.Interval, Max: max(w.cfg.MaxBackoff, w.cfg.Interval), Jitter: true}
	var next time.Time
	for backoff.Until(ctx, next) {
		start := time.Now()
		err := w.once(ctx)
		if ctx.Err() != nil {
			return
		}
		w.health.Set(partService, err)
		w.health.Looked(partService) // the first look: an answer or a failure
		w.health.Looked(partContent)
		if err != nil {
			next = time.Now().Add(bo.Next())
			continue
		}
		bo.Reset()
		next = start.Add(w.cfg.Interval)
	}
}

// once makes one step: reads the VM's name if it is not known yet, else
// polls the scheduled events and hands over what changed.
func (w *watcher) once(ctx context.Context) error {
	if w.vm == "" {
		name, err := w.get(ctx, pathVMName+nameQuery, w.cfg.RequestTimeout)
		if err != nil {
			return fmt.Errorf("azure: VM name: %w", err)
		}
		if w.vm = strings.TrimSpace(string(name)); w.vm == "" || len(w.vm) > 256 {
			w.vm = ""
			return errors.New("azure: VM name: empty or too long")
		}
		w.log.Debug("azure: watching the scheduled events of this VM", "vm", w.vm)
	}
	timeout := w.cfg.RequestTimeout
	if !w.answered {
		timeout = w.cfg.FirstRequestTimeout // the service may be enabling itself
	}
	body, err := w.get(ctx, pathScheduledEvents+eventsQuery, timeout)
	if err != nil {
		return fmt.Errorf("azure: scheduled events: %w", err)
	}
	w.answered = true // the service is enabled, whatever it said
	doc, raws, err := parseHead(body)
	if err != nil {
		return fmt.Errorf("azure: scheduled events: %w", err)
	}
	if w.acted && doc.Incarnation == w.incarnation {
		return nil // nothing changed: the events are not read
	}
	if doc.Events, err = parseEvents(raws); err != nil {
		return fmt.Errorf("azure: scheduled events: %w", err)
	}
	notices, problem := w.s.update(doc, w.vm, w.seen, time.Now(), w.log)
	w.health.Set(partContent, problem)
	for _, nt := range notices {
		w.log.Debug("azure: notice", "event", nt.Event, "notice", nt)
		if err := w.r.Send(ctx, nt); err != nil {
			return err
		}
	}
	w.incarnation, w.acted = doc.Incarnation, true
	return nil
}

// get reads path (with its query) and returns the body of a 200 answer.
func (w *watcher) get(ctx context.Context, path string, timeout time.Duration) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, w.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata", "true")
	res, err := w.hc.Do(req)
	if err != nil {
		return nil, httpguard.Stable(ctx, rctx, err, timeout)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body) // cut off past maxBody by the guard
	if err != nil {
		return nil, httpguard.Stable(ctx, rctx, err, timeout)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", res.StatusCode, httpguard.Snippet(body))
	}
	return body, nil
}

// update takes doc, read at now, as the events of the VM vm: it returns
// the notices of what changed since the notices this Watch sent (seen,
// which it updates), and the problem with events it could not report (nil
// if none). An event of vm that cannot be reported but was before keeps
// its place: it has not left the document, so it is not cleared.
func (s *Source) update(doc document, vm string, seen map[string]string, now time.Time, log *slog.Logger) ([]termsig.Notice, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var notices []termsig.Notice
	var problems []error
	next := map[string]tracked{}
	for _, e := range doc.Events {
		if !e.forVM(vm) {
			log.Debug("azure: an event for other resources", "event", clip(e.EventID), "resources", len(e.Resources))
			continue
		}
		if _, dup := next[e.EventID]; dup {
			continue
		}
		if err := e.check(); err != nil {
			problems = append(problems, err)
			if prev, ok := s.current[e.EventID]; ok {
				next[e.EventID] = prev
			}
			continue
		}
		nb, err := e.notBefore()
		if err != nil {
			problems = append(problems, err)
		}
		t := s.track(e, nb, now)
		next[e.EventID] = t
		if seen[e.EventID] != t.key {
			seen[e.EventID] = t.key
			notices = append(notices, e.notice(now, t.deadline))
		}
	}
	var gone []string
	for id := range seen {
		if _, ok := next[id]; !ok {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		delete(seen, id)
		notices = append(notices, termsig.Notice{Kind: termsig.Cleared, Event: id, Reason: "no longer scheduled", Observed: now})
	}
	for id, gen := range s.acked {
		if t, ok := next[id]; !ok || t.gen != gen {
			delete(s.acked, id)
		}
	}
	s.current = next
	return notices, errors.Join(problems...)
}

// track returns what is kept of e, whose NotBefore is nb, read at now:
// its generation kept if it was in the last document, its deadline kept
// unless its type or NotBefore changed. s.mu is held.
func (s *Source) track(e event, nb, now time.Time) tracked {
	key := e.EventType + "|" + e.NotBefore
	t, ok := s.current[e.EventID]
	if !ok {
		s.gen++ // new, or back after it left: to be acknowledged anew
		t.gen = s.gen
	}
	if !ok || t.key != key {
		t.key, t.deadline = key, nb
		if e.EventStatus == "Started" && nb.IsZero() {
			t.deadline = now // under way: no time left
		}
	}
	t.shared = len(e.Resources) > 1
	return t
}

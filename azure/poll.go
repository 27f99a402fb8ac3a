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
	partContent        // what the events say (unknown types, bad times, none for this VM)
	partName           // reading the VM's name again, once it is known
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
	freeHC func()          // closes what httpguard.Guard made for hc
	r      *termsig.Run
	health *health.Parts

	vm          string            // this VM's name; "" until it is known
	fixed       bool              // vm is Config.VMName: never read
	confirmed   bool              // an event named vm: it is right (a VM's name does not change)
	nameDue     time.Time         // when to read the name again while it is not confirmed
	seen        map[string]string // Event (the EventId, or its short form) → EventType|NotBefore of the notices this Watch sent
	answered    bool              // the scheduled events answered once: RequestTimeout from now on
	incarnation int64             // of the last document acted on
	acted       bool              // a document was acted on
}

func (s *Source) newWatcher(r *termsig.Run) *watcher {
	c := s.cfg.withDefaults()
	w := &watcher{s: s, cfg: c, log: c.Logger, base: c.base(), r: r, vm: c.VMName, fixed: c.VMName != "", seen: map[string]string{},
		health: health.New(r, parts)}
	w.hc = c.HTTPClient
	if w.hc == nil {
		w.tr = httpguard.NewTransport(2*time.Second, 1, c.dnsDial)
		w.hc = &http.Client{Transport: w.tr}
	}
	w.hc, w.freeHC = httpguard.Guard(w.hc, maxBody)
	return w
}

func (w *watcher) close() {
	w.freeHC()
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
		for i := range parts {
			w.health.Looked(i) // the first look: an answer or a failure
		}
		if err != nil {
			next = time.Now().Add(bo.Next())
			continue
		}
		bo.Reset()
		next = start.Add(w.cfg.Interval)
	}
}

// once makes one step: reads the VM's name if it is not known yet, else
// polls the scheduled events and hands over what changed. A name that no
// event has named yet is read again every nameInterval, and before a
// document whose events name only other VMs is acted on: one wrong answer
// (a proxy's page that passes for a name) must not make the source deaf.
func (w *watcher) once(ctx context.Context) error {
	if w.vm == "" {
		name, err := w.readName(ctx)
		if err != nil {
			return err
		}
		w.vm = name
		w.log.Debug("azure: watching the scheduled events of this VM", "vm", w.vm)
	} else if w.unsure() && !time.Now().Before(w.nameDue) && w.readNameAgain(ctx) {
		w.acted = false // the document is looked at again, for this name
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
	if w.unsure() && len(doc.Events) > 0 && !namesVM(doc, w.vm) {
		w.readNameAgain(ctx)
	}
	notices, problem := w.s.update(doc, w.vm, w.seen, time.Now(), w.log)
	if !w.confirmed && namesVM(doc, w.vm) {
		w.confirmed = true
		w.health.Set(partName, nil) // never read again
	}
	if !w.confirmed && len(doc.Events) > 0 {
		problem = errors.Join(problem, noneForVM(doc, w.vm))
	}
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

// unsure reports whether the VM's name may be wrong and may be read again.
func (w *watcher) unsure() bool { return !w.fixed && !w.confirmed }

// readName reads the VM's name and checks it against Azure's rules.
func (w *watcher) readName(ctx context.Context) (string, error) {
	w.nameDue = time.Now().Add(w.cfg.nameInterval)
	body, err := w.get(ctx, pathVMName+nameQuery, w.cfg.RequestTimeout)
	if err != nil {
		w.nameDue = time.Now().Add(min(w.cfg.MaxBackoff, w.cfg.nameInterval))
		return "", fmt.Errorf("azure: VM name: %w", err)
	}
	name := strings.TrimSpace(string(body))
	if !validVMName(name) {
		w.nameDue = time.Now().Add(min(w.cfg.MaxBackoff, w.cfg.nameInterval))
		return "", fmt.Errorf("azure: VM name: the answer is not an Azure VM name: %q", clip(name))
	}
	return name, nil
}

// readNameAgain reads the VM's name again and reports whether it changed.
// A failure keeps the name the watcher has, and shows in Status.
func (w *watcher) readNameAgain(ctx context.Context) bool {
	name, err := w.readName(ctx)
	if ctx.Err() != nil {
		return false
	}
	w.health.Set(partName, err)
	if err != nil || strings.EqualFold(name, w.vm) {
		return false
	}
	w.log.Info("azure: the VM's name read again is another", "was", w.vm, "vm", name)
	w.vm = name
	return true
}

// namesVM reports whether an event of doc concerns the VM named vm.
func namesVM(doc document, vm string) bool {
	for _, e := range doc.Events {
		if e.forVM(vm) {
			return true
		}
	}
	return false
}

// noneForVM returns the problem of a document whose events concern other
// VMs only, naming a few of them, or nil. It is normal in an availability
// set (its document is shared) and the sign of a wrong name otherwise.
func noneForVM(doc document, vm string) error {
	if namesVM(doc, vm) {
		return nil
	}
	const most = 3
	var names []string
	more := false
	for _, e := range doc.Events {
		for _, r := range e.Resources {
			switch {
			case slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, clip(r)) }):
			case len(names) == most:
				more = true
			default:
				names = append(names, clip(r))
			}
		}
	}
	which := "they name no VM"
	if len(names) > 0 {
		which = "they name " + strings.Join(names, ", ")
		if more {
			which += ", …"
		}
	}
	n := fmt.Sprintf("%d scheduled events", len(doc.Events))
	if len(doc.Events) == 1 {
		n = "1 scheduled event"
	}
	return fmt.Errorf("azure: %s, none for this VM %q (%s): another VM's, or a wrong VM name", n, clip(vm), which)
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
// which it updates), the problem with events it could not report (nil if
// none). An EventId listed more than
// once is the strongest of its entries (see event.strength). An event of
// vm that cannot be reported but was before keeps its place: it has not
// left the document, so it is not cleared.
func (s *Source) update(doc document, vm string, seen map[string]string, now time.Time, log *slog.Logger) ([]termsig.Notice, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var order []string
	mine := map[string]event{} // by key
	for _, e := range doc.Events {
		if !e.forVM(vm) {
			log.Debug("azure: an event for other resources", "event", clip(e.EventID), "resources", len(e.Resources))
			continue
		}
		k := e.key()
		prev, dup := mine[k]
		if !dup {
			order = append(order, k)
		}
		if !dup || e.strength() > prev.strength() {
			mine[k] = e
		}
	}
	var notices []termsig.Notice
	var problems []error
	next := map[string]tracked{}
	for _, k := range order {
		e := mine[k]
		if err := e.check(); err != nil {
			problems = append(problems, err)
			if prev, ok := s.current[k]; ok {
				next[k] = prev
			}
			continue
		}
		if k != e.EventID {
			problems = append(problems, fmt.Errorf("azure: event %s: EventId of %d bytes (more than %d): its notices' Event is shortened", clip(e.EventID), len(e.EventID), maxEventID))
		}
		t := s.track(e, k, now)
		if t.nbErr != nil {
			problems = append(problems, t.nbErr)
		}
		next[k] = t
		if seen[k] != t.key {
			seen[k] = t.key
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

// track returns what is kept of e, under key k, read at now: its
// generation kept if it was in the last document, its deadline kept
// unless its type or NotBefore changed (so that a NotBefore is judged
// against the time its event was first seen with it). s.mu is held.
func (s *Source) track(e event, k string, now time.Time) tracked {
	key := e.EventType + "|" + e.NotBefore
	t, ok := s.current[k]
	if !ok {
		s.gen++ // new, or back after it left: to be acknowledged anew
		t.gen = s.gen
	}
	if !ok || t.key != key {
		t.key = key
		t.deadline, t.nbErr = e.notBefore(now)
		if e.EventStatus == "Started" && t.deadline.IsZero() {
			t.deadline = now // under way: no time left
		}
	}
	t.id = e.EventID
	t.shared = len(e.Resources) > 1
	return t
}

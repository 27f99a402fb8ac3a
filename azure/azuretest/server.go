package azuretest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/termsig/termsig/internal/fakefault"
)

// The paths the server answers.
const (
	PathScheduledEvents = "/metadata/scheduledevents"
	PathVMName          = "/metadata/instance/compute/name"
)

// ackKey is the Fault.Key and [Server.Requests] key of acknowledgements
// (POST requests).
const ackKey = "POST"

// maxAckBody bounds what the server reads of an acknowledgement, so that a
// client cannot make it use unbounded memory. Real acknowledgements are a
// few hundred bytes.
const maxAckBody = 64 << 10

// newestVersion is the api-version that a request without one is told
// about.
const newestVersion = "2020-07-01"

// The statuses of a scheduled event.
const (
	statusScheduled = "Scheduled"
	statusStarted   = "Started"
)

// An Event is one entry of the scheduled-events document. The zero value
// of a field stands for what Azure sends most often, so that a test sets
// only what it cares about:
//
//	azuretest.Event{EventID: "e1", EventType: "Preempt", NotBefore: time.Now().Add(30 * time.Second)}
//
// is a preemption of the server's VM, scheduled by the platform, of
// unknown duration.
type Event struct {
	// EventID is the event's id, "EventId" in the document, which
	// acknowledgements name.
	EventID string

	// EventType is Reboot, Redeploy, Freeze, Preempt or Terminate. Any
	// other string is sent as is, for tests of types Azure may add.
	EventType string

	// ResourceType is what Resources are; "" means "VirtualMachine".
	ResourceType string

	// Resources are the VMs the event is for. nil means the server's VM
	// name (see [Server.SetVMName]), taken when the document is served;
	// an empty, non-nil slice is sent as [].
	Resources []string

	// EventStatus is Scheduled or Started; "" means "Scheduled".
	EventStatus string

	// NotBefore is when the event may start at the earliest, sent in RFC
	// 1123 form with GMT ("Mon, 19 Sep 2016 18:29:47 GMT"). The zero
	// time is sent as "", as Azure sends it once the event has started.
	NotBefore time.Time

	// Description says what the event is, for people.
	Description string

	// EventSource is Platform or User; "" means "Platform".
	EventSource string

	// DurationInSeconds is how long the event is expected to take; 0
	// means -1, Azure's "unknown".
	DurationInSeconds int
}

// wireEvent is an Event as the document spells it.
type wireEvent struct {
	EventID           string   `json:"EventId"`
	EventType         string   `json:"EventType"`
	ResourceType      string   `json:"ResourceType"`
	Resources         []string `json:"Resources"`
	EventStatus       string   `json:"EventStatus"`
	NotBefore         string   `json:"NotBefore"`
	Description       string   `json:"Description"`
	EventSource       string   `json:"EventSource"`
	DurationInSeconds int      `json:"DurationInSeconds"`
}

func (e Event) wire(vmName string) wireEvent {
	w := wireEvent{
		EventID:           e.EventID,
		EventType:         e.EventType,
		ResourceType:      cmpOr(e.ResourceType, "VirtualMachine"),
		Resources:         e.Resources,
		EventStatus:       cmpOr(e.EventStatus, statusScheduled),
		Description:       e.Description,
		EventSource:       cmpOr(e.EventSource, "Platform"),
		DurationInSeconds: e.DurationInSeconds,
	}
	if w.Resources == nil {
		w.Resources = []string{vmName}
	}
	if !e.NotBefore.IsZero() {
		w.NotBefore = e.NotBefore.UTC().Format(http.TimeFormat)
	}
	if w.DurationInSeconds == 0 {
		w.DurationInSeconds = -1
	}
	return w
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// A Server is a fake Azure Instance Metadata Service on a loopback port,
// for tests. It serves the scheduled-events document and the VM's name
// (see the package documentation), records acknowledgements, and serves
// what the test sets: events, a VM name, a slow first call. Faults are
// injected with [Server.Inject].
//
// Create it with [NewServer] and Close it when done. Its methods are safe
// for concurrent use.
type Server struct {
	// URL is the endpoint, such as http://127.0.0.1:41234, in place of
	// http://169.254.169.254.
	URL string

	host     *fakefault.Host                    // the sockets and the request counts
	faults   fakefault.Queue[fakefault.Effects] // has a lock of its own
	done     chan struct{}                      // closed by Close: WaitStartRequests gives up
	doneOnce sync.Once

	mu          sync.Mutex
	vmName      string
	events      []Event
	incarnation int
	startOnAck  bool
	enableDelay time.Duration // > 0: the next GET of the document starts enabling, which takes this long
	enabledAt   time.Time     // GETs of the document wait until then
	enabling    chan struct{} // closed and replaced by SetEnableDelay: waiting GETs are answered
	acks        []string
	acked       chan struct{} // closed and replaced when an acknowledgement is recorded
}

// NewServer starts a fake IMDS on 127.0.0.1 for a VM named "test-vm",
// with no events, DocumentIncarnation 1, and StartOnAck on.
func NewServer() *Server {
	s := &Server{
		done:        make(chan struct{}),
		vmName:      "test-vm",
		incarnation: 1,
		startOnAck:  true,
		enabling:    make(chan struct{}),
		acked:       make(chan struct{}),
	}
	s.host = fakefault.NewHost("azuretest")
	s.URL = s.host.URL()
	s.host.Serve(http.HandlerFunc(s.handle))
	return s
}

// Stop makes the server go away, as IMDS does when the network path to it
// breaks: it stops listening and drops every open connection, so clients
// see connection refused or reset. Requests that hang, are delayed or wait
// for the service to enable itself have their connections closed. Start
// brings it back on the same address with the same state. Stop on a
// stopped server does nothing.
func (s *Server) Stop() { s.host.Stop() }

// Start brings a stopped server back on its address. It returns an error if
// the address cannot be had again, or if the server was closed.
func (s *Server) Start() error { return s.host.Start() }

// Close releases every request that waits or hangs (their connections are
// closed without an answer), closes all connections and shuts the server
// down; Start fails after it, and WaitStartRequests returns. It is safe to
// call more than once.
func (s *Server) Close() {
	s.host.Close()
	s.doneOnce.Do(func() { close(s.done) })
}

// SetVMName sets the VM's name: what PathVMName answers, and the
// Resources of events that leave them nil. It is served as given.
func (s *Server) SetVMName(name string) {
	s.change(func() { s.vmName = name })
}

// SetEvents replaces the events of the document with events, in that
// order; with none, the document lists none. DocumentIncarnation goes up
// by one if the document's events change, as Azure's does, and stays if
// they are the same (as served: an event with nil Resources and one that
// names the VM are the same).
func (s *Server) SetEvents(events ...Event) {
	events = cloneEvents(events)
	s.change(func() { s.events = events })
}

// Events returns the events of the document: as set, with the changes
// that acknowledgements made (see [Server.SetStartOnAck]).
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneEvents(s.events)
}

func cloneEvents(events []Event) []Event {
	out := make([]Event, len(events))
	for i, e := range events {
		if e.Resources != nil {
			e.Resources = append([]string{}, e.Resources...)
		}
		out[i] = e
	}
	return out
}

// BumpIncarnation makes DocumentIncarnation go up by one with the same
// events, as Azure's can, for tests of a client that must not report the
// same event twice.
func (s *Server) BumpIncarnation() {
	s.mu.Lock()
	s.incarnation++
	s.mu.Unlock()
}

// Incarnation returns the DocumentIncarnation that the document has now.
func (s *Server) Incarnation() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.incarnation
}

// change applies f to the state under s.mu, and makes DocumentIncarnation
// go up if that changed the events as served.
func (s *Server) change(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.eventsJSON()
	f()
	if !bytes.Equal(before, s.eventsJSON()) {
		s.incarnation++
	}
}

// eventsJSON returns the events as served. s.mu must be held.
func (s *Server) eventsJSON() []byte {
	out := make([]wireEvent, 0, len(s.events))
	for _, e := range s.events {
		out = append(out, e.wire(s.vmName))
	}
	b, _ := json.Marshal(out)
	return b
}

// SetStartOnAck sets whether an acknowledgement starts the events it
// names, as Azure does: on (the default), an acknowledged event of the
// document that has not started becomes Started, with no NotBefore, and
// DocumentIncarnation goes up. Off, acknowledgements are only recorded
// (see [Server.StartRequests]), as while Azure has yet to act on them.
func (s *Server) SetStartOnAck(on bool) {
	s.mu.Lock()
	s.startOnAck = on
	s.mu.Unlock()
}

// SetEnableDelay makes the scheduled-events service enable itself again,
// as it does on a VM where it has not been called yet (or not for a day):
// the next GET of PathScheduledEvents that the server admits starts the
// enabling, which takes d. That GET, and every other that arrives while
// the enabling goes on, waits until it is over, then is answered with the
// document of that moment; so a client that gives up and asks again still
// waits out the rest, as on Azure, where it can take up to two minutes.
// [Server.Stop], [Server.Close] and the client giving up end a request's
// wait early (Stop and Close close its connection); the enabling itself
// goes on.
//
// Each call replaces the last: an enabling in progress ends, and the
// requests waiting for it are answered at once. d of zero or less leaves
// none to come.
func (s *Server) SetEnableDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enableDelay = max(d, 0)
	s.enabledAt = time.Time{}
	close(s.enabling)
	s.enabling = make(chan struct{})
}

// awaitEnabled holds a GET of the document while the service enables
// itself, starting the enabling if one is due, and returns true once the
// request is to be answered; false if its client gave up or the server
// went (then its connection is closed), as fakefault's holds do.
func (s *Server) awaitEnabled(w http.ResponseWriter, r *http.Request, gone <-chan struct{}) bool {
	s.mu.Lock()
	now := time.Now()
	if s.enableDelay > 0 {
		s.enabledAt = now.Add(s.enableDelay)
		s.enableDelay = 0
	}
	wait, ended := s.enabledAt.Sub(now), s.enabling
	s.mu.Unlock()
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ended:
		return true
	case <-r.Context().Done():
		return false
	case <-gone:
		fakefault.HangUp(w)
		return false
	}
}

// StartRequests returns the EventIds that acknowledgements have named so
// far, in the order they came, unknown ones and repeats included.
func (s *Server) StartRequests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.acks...)
}

// WaitStartRequests blocks until acknowledgements have named at least n
// EventIds, and returns them as [Server.StartRequests] does. If ctx ends
// first, or the server is closed, it returns those named so far and an
// error: ctx's, or one that says the server is closed.
func (s *Server) WaitStartRequests(ctx context.Context, n int) ([]string, error) {
	for {
		s.mu.Lock()
		acks, ch := append([]string{}, s.acks...), s.acked
		s.mu.Unlock()
		if len(acks) >= n {
			return acks, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return acks, ctx.Err()
		case <-s.done:
			return acks, errors.New("azuretest: server closed")
		}
	}
}

// Requests returns how many requests for path (such as
// PathScheduledEvents, the polls) the server has answered, faults,
// refusals and requests it hung up on included; POST requests, the
// acknowledgements, are counted under "POST" instead, and "" counts every
// request. A request that hangs counts once it ends.
func (s *Server) Requests(path string) int { return s.host.Requests(path) }

// Served returns a channel that is closed when a request next arrives or
// is answered, so that a test can wait for a poll without sleeping: take
// the channel, check Requests or InFlight, and wait on the channel if the
// count is not there yet.
func (s *Server) Served() <-chan struct{} { return s.host.Served() }

// AwaitRequests waits until the server has answered at least n requests
// for path (as counted by Requests), or ctx is done; then it returns ctx's
// error. A test reads Requests, then awaits that count plus k, to know
// that the client has seen the server's current state k times.
func (s *Server) AwaitRequests(ctx context.Context, path string, n int) error {
	return s.host.AwaitRequests(ctx, path, n)
}

// InFlight returns how many requests the server is answering now, such as
// requests held by a fault with Hang or Delay, or waiting for the
// service to enable itself (see [Server.SetEnableDelay]).
func (s *Server) InFlight() int { return s.host.InFlight() }

// handle answers one request: with the fault it takes, if any, else as
// IMDS does.
func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Path
	if r.Method == http.MethodPost {
		key = ackKey
		// Read the body now (bounded): until it is read, net/http does
		// not watch the connection, and a fault that holds the request
		// would not see its client give up.
		body, _ := io.ReadAll(io.LimitReader(r.Body, maxAckBody+1))
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.host.Arrive()
	defer s.host.Answered(key)

	f, cleared, hit := s.faults.Take(key)
	gone := s.host.Gone()
	if hit && f.Apply(w, r, cleared, gone, write) == fakefault.Handled {
		return
	}
	if !s.admit(w, r) {
		return
	}
	switch {
	case r.URL.Path == PathVMName:
		s.name(w, r)
	case r.Method == http.MethodPost:
		s.ack(w, r)
	default:
		if s.awaitEnabled(w, r, gone) {
			s.document(w)
		}
	}
}

// admit answers the requests that IMDS refuses, and returns true for the
// others.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Header["X-Forwarded-For"] != nil:
		writeJSON(w, http.StatusBadRequest, `{"error":"Bad request. Requests with an X-Forwarded-For header are not allowed"}`)
	case r.Header.Get("Metadata") != "true":
		writeJSON(w, http.StatusBadRequest, `{"error":"Bad request. Required metadata header not specified"}`)
	case r.URL.Path != PathScheduledEvents && r.URL.Path != PathVMName:
		writeJSON(w, http.StatusNotFound, `{"error":"Not found"}`)
	case r.Method != http.MethodGet && (r.Method != http.MethodPost || r.URL.Path != PathScheduledEvents):
		writeJSON(w, http.StatusMethodNotAllowed, `{"error":"Method not allowed"}`)
	case r.URL.Query().Get("api-version") == "":
		writeJSON(w, http.StatusBadRequest, `{"error":"Bad request. api-version was not specified in the request. For more information refer to aka.ms/azureimds","newest-versions":["`+newestVersion+`"]}`)
	default:
		return true
	}
	return false
}

// document serves the scheduled-events document as it is now.
func (s *Server) document(w http.ResponseWriter) {
	s.mu.Lock()
	doc := `{"DocumentIncarnation":` + strconv.Itoa(s.incarnation) + `,"Events":` + string(s.eventsJSON()) + `}`
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, doc)
}

// ack records an acknowledgement, {"StartRequests":[{"EventId":"..."}]},
// and starts the events it names if StartOnAck is on.
func (s *Server) ack(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAckBody))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			writeJSON(w, http.StatusRequestEntityTooLarge, `{"error":"Request body too large"}`)
		} else {
			writeJSON(w, http.StatusBadRequest, `{"error":"Bad request. Cannot read the request body"}`)
		}
		return
	}
	var req struct {
		StartRequests []struct {
			EventID string `json:"EventId"`
		} `json:"StartRequests"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, `{"error":"Bad request. The request body is not valid JSON"}`)
		return
	}

	s.mu.Lock()
	started := false
	for _, sr := range req.StartRequests {
		s.acks = append(s.acks, sr.EventID)
		if !s.startOnAck {
			continue
		}
		for i := range s.events {
			e := &s.events[i]
			if e.EventID == sr.EventID && e.EventStatus != statusStarted {
				e.EventStatus, e.NotBefore = statusStarted, time.Time{}
				started = true
			}
		}
	}
	if started {
		s.incarnation++
	}
	if len(req.StartRequests) > 0 {
		close(s.acked)
		s.acked = make(chan struct{})
	}
	s.mu.Unlock()

	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// name serves PathVMName, a leaf node: as text.
func (s *Server) name(w http.ResponseWriter, r *http.Request) {
	if f := r.URL.Query().Get("format"); f != "" && f != "text" {
		writeJSON(w, http.StatusBadRequest, `{"error":"Bad request. Only format=text is supported for a leaf node"}`)
		return
	}
	s.mu.Lock()
	name := s.vmName
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(name)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, name)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// write answers for a fault, as a front end in IMDS's place does: as
// text, with the status text for an empty body unless the status is 200.
func write(w http.ResponseWriter, status int, body string) {
	if body == "" && status != http.StatusOK {
		body = http.StatusText(status)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

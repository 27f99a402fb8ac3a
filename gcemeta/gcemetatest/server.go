package gcemetatest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig/internal/fakefault"
)

// The keys that termsig's gcemeta package watches, as paths below
// /computeMetadata/v1/.
const (
	Preempted           = "instance/preempted"
	MaintenanceEvent    = "instance/maintenance-event"
	UpcomingMaintenance = "instance/upcoming-maintenance"
)

// prefix is where the metadata keys live on the server.
const prefix = "/computeMetadata/v1/"

// flavorHeader is the header, with the value "Google", that requests to the
// metadata server carry, and that the server puts on its answers.
const flavorHeader = "Metadata-Flavor"

// A Server is a GCE metadata server on a loopback port, for tests. It
// speaks the real protocol: it refuses requests without the header
// Metadata-Flavor: Google or with X-Forwarded-For (403), puts an ETag on
// every answer, and holds wait_for_change requests until the value's ETag
// differs from last_etag or timeout_sec passes.
//
// A new Server has [Preempted] = "FALSE", [MaintenanceEvent] = "NONE" and
// [UpcomingMaintenance] = "{}", as on a VM with nothing scheduled. Its
// methods are safe for concurrent use. Close it when done; Close releases
// every request still waiting.
type Server struct {
	// URL is the base URL, such as "http://127.0.0.1:40123"; metadata
	// lives under URL + "/computeMetadata/v1/".
	URL string

	hs        *httptest.Server
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	faults    fakefault.Queue[fault] // has a lock of its own

	mu       sync.Mutex
	values   map[string]string
	changed  chan struct{} // closed and replaced when a value changes
	drop     map[string]chan struct{}
	requests map[string]int
	waiting  map[string]int
	stats    chan struct{} // closed and replaced when anything observable changes
	noETag   bool          // last_etag ignored (see IgnoreLastETag)
}

// NewServer starts a Server on 127.0.0.1 with a port of its own.
func NewServer() *Server {
	s := &Server{
		done: make(chan struct{}),
		values: map[string]string{
			Preempted:           "FALSE",
			MaintenanceEvent:    "NONE",
			UpcomingMaintenance: "{}",
		},
		changed:  make(chan struct{}),
		drop:     map[string]chan struct{}{},
		requests: map[string]int{},
		waiting:  map[string]int{},
		stats:    make(chan struct{}),
	}
	s.hs = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.hs.URL
	return s
}

// Host returns the server's "127.0.0.1:port": the form that the
// GCE_METADATA_HOST environment variable and gcemeta.Config.Host take.
func (s *Server) Host() string { return strings.TrimPrefix(s.URL, "http://") }

// Close releases every request still waiting, closes all connections and
// shuts the server down. It returns once every handler has returned. It is
// safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.hs.CloseClientConnections()
		s.hs.Close()
	})
}

// Set sets key (such as [Preempted]) to value, creating it if needed. Long
// polls on key are answered at once if value changes the key's ETag, that
// is, if it differs from the current value.
func (s *Server) Set(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.values[key]; ok && old == value {
		return
	}
	s.values[key] = value
	s.broadcastValues()
}

// Delete removes key: requests for it get 404 Not Found, and long polls on
// it are answered so at once.
func (s *Server) Delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.values[key]; !ok {
		return
	}
	delete(s.values, key)
	s.broadcastValues()
}

// Value returns key's value and whether it exists.
func (s *Server) Value(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[key]
	return v, ok
}

// IgnoreLastETag makes the server ignore last_etag from now on, or heed
// it again, for long polls that arrive after the call. Ignoring it, a
// wait_for_change request waits for the next change of the value it
// finds, as without last_etag, even when the value has changed since the
// answer whose ETag the client sends: an emulator that does so holds a
// client that resumes long polling after an outage until timeout_sec,
// with a change made during the outage unseen.
func (s *Server) IgnoreLastETag(ignore bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noETag = ignore
}

// DropWaiting closes, without an answer, the connections of the long polls
// on key that are waiting now: a connection lost in the middle of a long
// poll. See [Server.Waiting] to know that one is waiting.
func (s *Server) DropWaiting(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.drop[key]; ok {
		close(ch)
		delete(s.drop, key)
	}
}

// Requests returns how many requests for key the server has received,
// refused ones included. key is the path below /computeMetadata/v1/
// without the query, such as [Preempted].
func (s *Server) Requests(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[key]
}

// Waiting returns how many wait_for_change requests on key are waiting
// for a change now.
func (s *Server) Waiting(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting[key]
}

// Await blocks until cond returns true, and returns nil; or until ctx is
// done or the server is closed, and returns an error. It calls cond at
// once and again after every change of a value or of a count that
// [Server.Requests] or [Server.Waiting] report, so that a test can wait for
// "the source is waiting on a long poll" or "ten requests arrived" without
// sleeping. cond may call the Server's methods.
func (s *Server) Await(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.stats
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errors.New("gcemetatest: server closed")
		}
	}
}

// ETag returns the ETag that the server sends with value for key. Equal
// values have equal ETags, as on the real server.
func ETag(key, value string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(value))
	return fmt.Sprintf("%016x", h.Sum64())
}

// broadcastValues wakes long polls and Await. s.mu must be held.
func (s *Server) broadcastValues() {
	close(s.changed)
	s.changed = make(chan struct{})
	s.broadcastStats()
}

// broadcastStats wakes Await. s.mu must be held.
func (s *Server) broadcastStats() {
	close(s.stats)
	s.stats = make(chan struct{})
}

// waitQuery is what a request's query asks for.
type waitQuery struct {
	wait     bool
	lastETag string
	timeout  time.Duration // 0: no limit
	json     bool
}

// parseQuery reads the query parameters the server understands, with the
// real server's rules: wait_for_change is "true" or "false", timeout_sec a
// positive number of seconds, alt "json" or "text".
func parseQuery(q url.Values) (waitQuery, error) {
	var w waitQuery
	switch v := q.Get("wait_for_change"); strings.ToLower(v) {
	case "true":
		w.wait = true
	case "false", "":
	default:
		return w, fmt.Errorf("bad wait_for_change %q", v)
	}
	w.lastETag = q.Get("last_etag")
	if v := q.Get("timeout_sec"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 24*3600 {
			return w, fmt.Errorf("bad timeout_sec %q", v)
		}
		w.timeout = time.Duration(n) * time.Second
	}
	switch v := q.Get("alt"); v {
	case "json":
		w.json = true
	case "text", "":
	default:
		return w, fmt.Errorf("bad alt %q", v)
	}
	return w, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, prefix)
	if r.URL.Path == "/" {
		key = ""
	}
	s.mu.Lock()
	s.requests[key]++
	s.broadcastStats()
	s.mu.Unlock()

	q, ok := s.admit(w, r, key)
	if !ok {
		return
	}
	f, release, hit := s.faults.Take(key)
	if hit {
		if f.foreign {
			w.Header().Del(flavorHeader)
		}
		switch f.Apply(w, r, release, s.done, s.faultAnswer(key)) {
		case fakefault.Handled:
			return
		case fakefault.Released:
			f = fault{} // served normally, NoLongPoll and Foreign left out
			w.Header().Set(flavorHeader, "Google")
		}
	}
	if q.json {
		w.Header().Set("Content-Type", "application/json")
	}
	if q.wait && !f.noLongPoll {
		s.longPoll(w, r, key, q)
		return
	}
	s.mu.Lock()
	v, ok := s.values[key]
	s.mu.Unlock()
	s.replyValue(w, key, v, ok)
}

// admit answers the requests that the real server refuses or answers
// without looking at a value, and returns the query of the others, with
// true.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, key string) (waitQuery, bool) {
	h := w.Header()
	h.Set(flavorHeader, "Google")
	h.Set("Server", "Metadata Server for VM")
	if r.Header.Get(flavorHeader) != "Google" {
		s.reply(w, key, http.StatusForbidden, "Missing required header \"Metadata-Flavor\": \"Google\"\n")
		return waitQuery{}, false
	}
	if _, ok := r.Header["X-Forwarded-For"]; ok {
		s.reply(w, key, http.StatusForbidden, "Request forbidden: X-Forwarded-For header present\n")
		return waitQuery{}, false
	}
	if r.Method != http.MethodGet {
		s.reply(w, key, http.StatusMethodNotAllowed, "Method not allowed\n")
		return waitQuery{}, false
	}
	if r.URL.Path == "/" {
		// What Google's client probes to tell whether it is on GCE.
		s.reply(w, key, http.StatusOK, "computeMetadata/\n")
		return waitQuery{}, false
	}
	q, err := parseQuery(r.URL.Query())
	if err != nil || !strings.HasPrefix(r.URL.Path, prefix) {
		msg := "Bad request\n"
		if err != nil {
			msg = err.Error() + "\n"
		}
		s.reply(w, key, http.StatusBadRequest, msg)
		return waitQuery{}, false
	}
	return q, true
}

// longPoll answers once key's ETag differs from q.lastETag (or, without
// last_etag, once the value changes), or when q.timeout passes, with the
// value of the moment.
func (s *Server) longPoll(w http.ResponseWriter, r *http.Request, key string, q waitQuery) {
	var timeout <-chan time.Time
	if q.timeout > 0 {
		t := time.NewTimer(q.timeout)
		defer t.Stop()
		timeout = t.C
	}
	s.mu.Lock()
	if q.lastETag == "" || s.noETag {
		// No ETag: wait for the next change of the value as it is now.
		if v, ok := s.values[key]; ok {
			q.lastETag = ETag(key, v)
		}
	}
	// The drop channel is taken in the same critical section that counts
	// this request as waiting, so that a DropWaiting that sees it waiting
	// also drops it.
	drop, dok := s.drop[key]
	if !dok {
		drop = make(chan struct{})
		s.drop[key] = drop
	}
	s.waiting[key]++
	s.broadcastStats()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting[key]--
		s.broadcastStats()
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		v, ok := s.values[key]
		changed := s.changed
		s.mu.Unlock()
		if !ok || ETag(key, v) != q.lastETag {
			s.replyValue(w, key, v, ok)
			return
		}
		select {
		case <-changed:
		case <-timeout:
			s.replyValue(w, key, v, ok)
			return
		case <-drop:
			fakefault.HangUp(w)
			return
		case <-r.Context().Done():
			return
		case <-s.done:
			fakefault.HangUp(w)
			return
		}
	}
}

func (s *Server) replyValue(w http.ResponseWriter, key, v string, ok bool) {
	if !ok {
		s.reply(w, key, http.StatusNotFound, "Not Found\n")
		return
	}
	w.Header().Set("ETag", ETag(key, v))
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/text")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(v))
}

// reply answers with code and body; the ETag is that of the body, since the
// real server sends one on every answer.
func (s *Server) reply(w http.ResponseWriter, key string, code int, body string) {
	w.Header().Set("ETag", ETag(key, strconv.Itoa(code)+body))
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	}
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

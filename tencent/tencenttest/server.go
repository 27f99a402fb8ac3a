package tencenttest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig/internal/fakefault"
)

// The metadata paths the server knows, relative to /latest/meta-data/, for
// [Server.Inject] and [Server.Requests].
const (
	PathTerminationTime = "spot/termination-time"
	PathInstanceID      = "instance-id"
)

// InstanceID is the instance the server stands for.
const InstanceID = "ins-termsig0"

// FormatTime returns t as the service writes a termination time: in China
// Standard Time (UTC+8), to the second, with no zone in the text, such as
// "2018-08-18 12:05:33".
func FormatTime(t time.Time) string {
	return t.In(time.FixedZone("UTC+8", 8*60*60)).Format("2006-01-02 15:04:05")
}

const metadataPrefix = "/latest/meta-data/"

// A Server is a fake CVM metadata service on a loopback port, for tests.
// It answers 404 for the termination time until
// [Server.SetTerminationTime], and misbehaves as [Server.Inject] says.
//
// Create it with [NewServer] and Close it when done. Its methods are safe
// for concurrent use.
type Server struct {
	// URL is the endpoint, such as http://127.0.0.1:41234, for
	// tencent.Config.Endpoint or TENCENT_METADATA_ENDPOINT.
	URL string

	host   *fakefault.Host                    // the sockets and the request counts
	faults fakefault.Queue[fakefault.Effects] // has a lock of its own

	mu sync.Mutex
	at time.Time // the termination time; zero: none
}

// NewServer starts a fake metadata service on 127.0.0.1 with nothing
// scheduled.
func NewServer() *Server {
	s := &Server{host: fakefault.NewHost("tencenttest")}
	s.URL = s.host.URL()
	s.host.Serve(http.HandlerFunc(s.handle))
	return s
}

// Stop makes the server go away, as the service does when the network
// path to it breaks: it stops listening and drops every open connection,
// so clients see connection refused or reset. Start brings it back on the
// same address with the same state. Stop on a stopped server does nothing.
func (s *Server) Stop() { s.host.Stop() }

// Start brings a stopped server back on its address. It returns an error
// if the address cannot be had again, or if the server was closed.
func (s *Server) Start() error { return s.host.Start() }

// Close releases every request that waits or hangs (their connections are
// closed without an answer), closes all connections and shuts the server
// down; Start fails after it. It is safe to call more than once.
func (s *Server) Close() { s.host.Close() }

// SetTerminationTime schedules the instance's reclaim at at:
// spot/termination-time answers at in China Standard Time and whole
// seconds (see [FormatTime]), until ClearTerminationTime.
func (s *Server) SetTerminationTime(at time.Time) {
	s.mu.Lock()
	s.at = at
	s.mu.Unlock()
}

// ClearTerminationTime makes spot/termination-time answer 404 again.
func (s *Server) ClearTerminationTime() { s.SetTerminationTime(time.Time{}) }

// Requests returns how many requests for path (such as
// [PathTerminationTime]) the server has answered, faults and requests it
// hung up on included; "" counts all. A request that hangs counts once it
// ends.
func (s *Server) Requests(path string) int { return s.host.Requests(path) }

// AwaitRequests waits until the server has answered at least n requests
// for path (as counted by Requests), or ctx is done; then it returns
// ctx's error.
func (s *Server) AwaitRequests(ctx context.Context, path string, n int) error {
	return s.host.AwaitRequests(ctx, path, n)
}

// InFlight returns how many requests the server is answering now, such as
// requests held by a fault with Hang or Delay.
func (s *Server) InFlight() int { return s.host.InFlight() }

// Served returns a channel that is closed when a request next arrives or
// is answered, so that a test can wait without sleeping: take the channel,
// check Requests or InFlight, and wait on the channel if the count is not
// there yet.
func (s *Server) Served() <-chan struct{} { return s.host.Served() }

// handle answers one request: with the fault it takes, if any, else as
// the service does.
func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, metadataPrefix)
	s.host.Arrive()
	defer s.host.Answered(key)

	f, cleared, hit := s.faults.Take(key)
	if hit && f.Apply(w, r, cleared, s.host.Gone(), write) == fakefault.Handled {
		return
	}
	switch {
	case !strings.HasPrefix(r.URL.Path, metadataPrefix):
		write(w, http.StatusNotFound, "")
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		write(w, http.StatusMethodNotAllowed, "")
	default:
		status, body := s.metadata(key)
		write(w, status, body)
	}
}

// write answers with status and body, the status text for an empty body
// other than 200's.
func write(w http.ResponseWriter, status int, body string) {
	if body == "" && status != http.StatusOK {
		body = http.StatusText(status)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// metadata returns the answer to a request for key.
func (s *Server) metadata(key string) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch key {
	case PathTerminationTime:
		if s.at.IsZero() {
			return http.StatusNotFound, ""
		}
		return http.StatusOK, FormatTime(s.at)
	case PathInstanceID:
		return http.StatusOK, InstanceID
	}
	return http.StatusNotFound, ""
}

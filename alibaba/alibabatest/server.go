package alibabatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig/internal/fakefault"
)

// The metadata paths the server knows, relative to /latest/meta-data/,
// and [KeyToken], the key of token requests, for [Server.Inject] and
// [Server.Requests].
const (
	PathTerminationTime = "instance/spot/termination-time"
	PathInstanceID      = "instance-id"
	KeyToken            = "api/token"
)

// InstanceID is the instance the server stands for.
const InstanceID = "i-bp1termsig0fake0000"

// FormatTime returns t as the service writes a termination time: UTC, to
// the second (yyyy-MM-ddThh:mm:ssZ), such as "2015-01-05T18:02:00Z".
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// maxTokenTTL is the longest token the service gives, in seconds.
const maxTokenTTL = 21600

const (
	tokenPath      = "/latest/api/token"
	metadataPrefix = "/latest/meta-data/"
	tokenHeader    = "X-Aliyun-Ecs-Metadata-Token"
	ttlHeader      = "X-Aliyun-Ecs-Metadata-Token-Ttl-Seconds"
)

// A Server is a fake ECS metadata service on a loopback port, for tests.
// It speaks both of Alibaba's modes (see the package documentation),
// answers 404 for the termination time until [Server.SetTerminationTime],
// and misbehaves as [Server.Inject] says.
//
// Create it with [NewServer] and Close it when done. Its methods are safe
// for concurrent use.
type Server struct {
	// URL is the endpoint, such as http://127.0.0.1:41234, for
	// alibaba.Config.Endpoint or ALIBABA_METADATA_ENDPOINT.
	URL string

	host   *fakefault.Host                    // the sockets and the request counts
	faults fakefault.Queue[fakefault.Effects] // has a lock of its own

	mu       sync.Mutex
	tokens   map[string]time.Time // token → when it expires
	required bool                 // security hardening mode only
	at       time.Time            // the termination time; zero: none
}

// NewServer starts a fake metadata service on 127.0.0.1 with nothing
// scheduled, in both modes, as an instance is by default.
func NewServer() *Server {
	s := &Server{tokens: map[string]time.Time{}}
	s.host = fakefault.NewHost("alibabatest")
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

// SetTerminationTime schedules the instance's release at at:
// instance/spot/termination-time answers at, in UTC and whole seconds
// (see [FormatTime]), until ClearTerminationTime.
func (s *Server) SetTerminationTime(at time.Time) {
	s.mu.Lock()
	s.at = at
	s.mu.Unlock()
}

// ClearTerminationTime makes instance/spot/termination-time answer 404
// again.
func (s *Server) ClearTerminationTime() { s.SetTerminationTime(time.Time{}) }

// SetTokensRequired sets the security hardening mode only (required
// true), in which a request without a token gets 403, or both modes.
func (s *Server) SetTokensRequired(required bool) {
	s.mu.Lock()
	s.required = required
	s.mu.Unlock()
}

// ExpireTokens invalidates every token given so far, as a restart of the
// service does: the next request with one of them gets 401.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	clear(s.tokens)
	s.mu.Unlock()
}

// Requests returns how many requests for key (such as
// [PathTerminationTime], or [KeyToken]) the server has answered, faults
// and requests it hung up on included; "" counts all. A request that
// hangs counts once it ends.
func (s *Server) Requests(key string) int { return s.host.Requests(key) }

// AwaitRequests waits until the server has answered at least n requests
// for key (as counted by Requests), or ctx is done; then it returns ctx's
// error. A test reads Requests, then awaits that count plus k, to know
// that the client has seen the server's current state k times.
func (s *Server) AwaitRequests(ctx context.Context, key string, n int) error {
	return s.host.AwaitRequests(ctx, key, n)
}

// InFlight returns how many requests the server is answering now, such as
// requests held by a fault with Hang or Delay.
func (s *Server) InFlight() int { return s.host.InFlight() }

// Served returns a channel that is closed when a request next arrives or
// is answered, so that a test can wait for a poll without sleeping: take
// the channel, check Requests or InFlight, and wait on the channel if the
// count is not there yet.
func (s *Server) Served() <-chan struct{} { return s.host.Served() }

// handle answers one request: with the fault it takes, if any, else as
// the service does.
func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, metadataPrefix)
	if r.URL.Path == tokenPath {
		key = KeyToken
	}
	s.host.Arrive()
	defer s.host.Answered(key)

	f, cleared, hit := s.faults.Take(key)
	if hit && f.Apply(w, r, cleared, s.host.Gone(), write) == fakefault.Handled {
		return
	}
	switch {
	case r.URL.Path == tokenPath:
		s.token(w, r)
	case !strings.HasPrefix(r.URL.Path, metadataPrefix):
		write(w, http.StatusNotFound, "")
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		write(w, http.StatusMethodNotAllowed, "")
	default:
		if status := s.authorize(r); status != http.StatusOK {
			write(w, status, "")
			return
		}
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

// token serves PUT /latest/api/token as the service does: 400 for a TTL
// that is missing or out of 1 to 21600 s, 403 for a request with an
// X-Forwarded-For header.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		write(w, http.StatusMethodNotAllowed, "")
		return
	}
	if _, ok := r.Header["X-Forwarded-For"]; ok {
		write(w, http.StatusForbidden, "")
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(ttlHeader))
	if err != nil || ttl < 1 || ttl > maxTokenTTL {
		write(w, http.StatusBadRequest, "Missing or Invalid Parameters")
		return
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	s.mu.Lock()
	s.tokens[tok] = time.Now().Add(time.Duration(ttl) * time.Second)
	s.mu.Unlock()
	write(w, http.StatusOK, tok)
}

// authorize returns 200 if r may read metadata, else the status to answer:
// 401 for a token that is unknown or expired, 403 for no token in the
// security hardening mode only.
func (s *Server) authorize(r *http.Request) int {
	tok := r.Header.Get(tokenHeader)
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok == "" {
		if s.required {
			return http.StatusForbidden
		}
		return http.StatusOK
	}
	exp, ok := s.tokens[tok]
	if !ok || time.Now().After(exp) {
		delete(s.tokens, tok)
		return http.StatusUnauthorized
	}
	return http.StatusOK
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

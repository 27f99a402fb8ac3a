package ghfake

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Config configures a [Server]. Its zero value works.
type Config struct {
	// Token is the API token that the REST API accepts, sent as
	// "Authorization: Bearer TOKEN" or "Authorization: token TOKEN"; any
	// other request gets GitHub's 401 "Bad credentials". "" accepts every
	// request, with or without a token.
	Token string
	// Latency is added to every REST API request before it is answered
	// (not to the fake runner's private endpoints). Zero adds none.
	Latency time.Duration
}

// A Server is a fake GitHub: a REST API and the service the fake runner's
// config.sh and listener talk to, on a loopback port. Start it with
// [Start] and stop it with [Server.Close]. All its methods are safe for
// concurrent use.
type Server struct {
	cfg    Config
	url    string
	srv    *http.Server
	api    *http.ServeMux // the REST API, under /api/v3
	fake   *http.ServeMux // the fake runner's endpoints, under /_fake/
	done   chan struct{}  // closed by Close: every waiting handler returns
	served chan struct{}  // closed when Serve has returned
	active sync.WaitGroup // handlers running; Add only under mu while !closed
	once   sync.Once

	mu    sync.Mutex
	state // guarded by mu
}

// Paths of the two parts of the server.
const (
	apiPrefix  = "/api/v3"
	fakePrefix = "/_fake/"
)

// Start starts a fake GitHub on a free port of 127.0.0.1. It returns an
// error only if it cannot listen.
func Start(cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ghfake: listen on 127.0.0.1: %w", err)
	}
	s := &Server{
		cfg:    cfg,
		url:    "http://" + ln.Addr().String(),
		done:   make(chan struct{}),
		served: make(chan struct{}),
		state:  newState(time.Now()),
	}
	s.api = s.apiRoutes()
	s.fake = s.fakeRoutes()
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Close stops the server: requests that wait (for [Config.Latency], a
// hanging [Fault], or a listener's next event) are released, every
// connection is closed, and Close returns once no goroutine of the server
// is left. The state stays readable. Close may be called more than once,
// also concurrently.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		_ = s.srv.Close()
		close(s.done)
	})
	<-s.served
	s.active.Wait()
}

// URL returns the server's root, "http://127.0.0.1:PORT": GitHub's web
// root, under which config.sh takes URL()+"/OWNER/REPO" or URL()+"/ORG".
func (s *Server) URL() string { return s.url }

// APIURL returns the REST API's base URL, URL()+"/api/v3/", as on GitHub
// Enterprise Server: what go-github's Client.BaseURL takes.
func (s *Server) APIURL() string { return s.url + apiPrefix + "/" }

// serveHTTP sends each request to its part of the server.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		writeError(w, http.StatusServiceUnavailable, "ghfake: the server is closing", docREST)
		return
	}
	defer s.active.Done()
	switch {
	case r.URL.Path == apiPrefix || strings.HasPrefix(r.URL.Path, apiPrefix+"/"):
		s.serveAPI(w, r)
	case strings.HasPrefix(r.URL.Path, fakePrefix):
		s.fake.ServeHTTP(w, r)
	default:
		writeError(w, http.StatusNotFound, "Not Found", docREST)
	}
}

// enter counts a handler in, unless the server is closing.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.active.Add(1)
	return true
}

// serveAPI answers a REST API request: it is recorded, delayed by the
// latency, answered by a fault if one matches, checked for the token,
// and then routed.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	i := s.recordCall(r)
	defer func() { s.finishCall(i, sw.status) }()
	if !s.pause(r.Context(), s.cfg.Latency) {
		abort(sw)
		return
	}
	s.setAPIHeaders(sw.Header())
	if f, ok := s.matchFault(r); ok {
		s.answerFault(sw, r, f)
		return
	}
	if !s.authorized(r) {
		writeAPIError(sw, http.StatusUnauthorized, "Bad credentials", docREST)
		return
	}
	s.api.ServeHTTP(sw, r)
}

// pause waits for d, or until the client gives up or the server closes;
// it reports whether d has passed.
func (s *Server) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.done:
	}
	return false
}

// abort drops a request's connection without an answer, as a server
// that died would: returning from the handler would answer 200.
func abort(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// authorized reports whether r carries the configured token.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || (!strings.EqualFold(scheme, "Bearer") && !strings.EqualFold(scheme, "token")) {
		return false
	}
	return strings.TrimSpace(tok) == s.cfg.Token
}

// A statusWriter remembers the status of its answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

package ghfake

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A Call is a REST API request the server received.
type Call struct {
	Method string
	// Path is the request's path after /api/v3, without the query, such
	// as "/repos/acme/app/actions/runs/9000000001/cancel".
	Path string
	// Query is the raw query, such as "name=spot-1&per_page=100".
	Query string
	// Status is the status answered; 0 while unanswered, and for good if
	// the request was never answered (a hanging fault, a client that gave
	// up during the latency).
	Status int
	// At is when the request arrived.
	At time.Time
}

// recordCall records r's arrival and returns its index.
func (s *Server) recordCall(r *http.Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{
		Method: r.Method,
		Path:   strings.TrimPrefix(r.URL.Path, apiPrefix),
		Query:  r.URL.RawQuery,
		At:     time.Now(),
	})
	s.notifyLocked()
	return len(s.calls) - 1
}

// finishCall records call i's status, if it was answered.
func (s *Server) finishCall(i, status int) {
	if status == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[i].Status = status
	s.notifyLocked()
}

// rateLimit is the API's requests per hour, as GitHub's for a user.
const rateLimit = 5000

// A rateWindow counts the requests of the current hour.
type rateWindow struct {
	used  int
	reset time.Time
}

// setAPIHeaders counts a request and sets the headers GitHub sends with
// every answer.
func (s *Server) setAPIHeaders(h http.Header) {
	now := time.Now()
	s.mu.Lock()
	// A new window after an hour, or before the requests run out: the fake
	// never rate-limits on its own (see Fault), and go-github would refuse
	// to send anything while X-RateLimit-Remaining says 0.
	if !now.Before(s.rate.reset) || s.rate.used >= rateLimit-1 {
		s.rate = rateWindow{reset: now.Add(time.Hour)}
	}
	s.rate.used++
	rw := s.rate
	s.mu.Unlock()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	h.Set("X-GitHub-Request-Id", requestID())
	h.Set("X-RateLimit-Limit", strconv.Itoa(rateLimit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(rateLimit-rw.used, 0)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(rw.reset.Unix(), 10))
	h.Set("X-RateLimit-Used", strconv.Itoa(rw.used))
	h.Set("X-RateLimit-Resource", "core")
}

// requestID returns an id like GitHub's X-GitHub-Request-Id.
func requestID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%X:%X:%X:%X:%X", b[0:2], b[2:4], b[4:6], b[6:8], b[8:10])
}

// apiError is GitHub's error answer.
type apiError struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
	Status           string `json:"status"`
}

// writeAPIError answers with GitHub's error JSON.
func writeAPIError(w http.ResponseWriter, status int, msg, doc string) {
	writeJSON(w, status, apiError{Message: msg, DocumentationURL: doc, Status: strconv.Itoa(status)})
}

// writeError is writeAPIError for answers outside the REST API, which
// lack its headers.
func writeError(w http.ResponseWriter, status int, msg, doc string) {
	writeFakeJSON(w, status, apiError{Message: msg, DocumentationURL: doc, Status: strconv.Itoa(status)})
}

// writeFakeJSON is writeJSON for answers outside the REST API.
func writeFakeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	writeJSON(w, status, v)
}

// writeJSON answers with v as JSON. v is always one of this package's
// types, which encode; an error would be this package's bug, answered 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(apiError{Message: "ghfake: " + err.Error(), DocumentationURL: docREST, Status: "500"})
	}
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

package ghfake

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// This file holds the private endpoints that the fake runner talks to,
// under /_fake/, in place of GitHub's runner service. They take no
// latency and no faults, and are not recorded as calls. A listener holds
// a session, GET /_fake/session, a stream of JSON events (one a line) that
// lasts as long as the listener runs: while it is open the runner is
// online, and when its connection drops the runner is offline.

// Events of a session.
const (
	eventJob     = "job"     // a job for the runner: Job
	eventCancel  = "cancel"  // the run of job JobID was cancelled
	eventFinish  = "finish"  // job JobID has done its steps (see Server.FinishJob)
	eventDeleted = "deleted" // the registration was removed
)

// An event is what the server tells a listener.
type event struct {
	Type  string    `json:"type"`
	Job   *jobEvent `json:"job,omitempty"`
	JobID int64     `json:"job_id,omitempty"`
}

// A jobEvent is a job given to a runner.
type jobEvent struct {
	ID       int64         `json:"id"`
	RunID    int64         `json:"run_id"`
	Repo     string        `json:"repo"`
	Name     string        `json:"name"`
	Duration time.Duration `json:"duration"` // 0: until cancelled or stopped
	Fail     bool          `json:"fail"`
}

// registerRequest is what config.sh sends.
type registerRequest struct {
	Scope     string   `json:"scope"` // "owner/repo" or "org"
	Token     string   `json:"token"`
	Name      string   `json:"name"`
	Labels    []string `json:"labels"`
	Replace   bool     `json:"replace"`
	Ephemeral bool     `json:"ephemeral"`
}

// registerResponse is the new registration.
type registerResponse struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Secret   string `json:"secret"` // the listener's credential, .credentials' clientId
	Replaced bool   `json:"replaced"`
}

// Results a listener reports for its job.
const (
	resultSucceeded = "succeeded"
	resultFailed    = "failed"
	resultCancelled = "cancelled"
	resultShutdown  = "shutdown" // the listener was stopped mid-job
)

// completeRequest reports the end of a job.
type completeRequest struct {
	JobID  int64  `json:"job_id"`
	Result string `json:"result"`
}

// completeResponse says how the job ended, as GitHub records it.
type completeResponse struct {
	Conclusion string `json:"conclusion"`
}

// fakeRoutes returns the private endpoints' routes.
func (s *Server) fakeRoutes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /_fake/register", s.handleRegister)
	m.HandleFunc("GET /_fake/session", s.handleSession)
	m.HandleFunc("POST /_fake/complete", s.handleComplete)
	m.HandleFunc("POST /_fake/offline", s.handleOffline)
	m.HandleFunc("/_fake/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "Not Found", docREST)
	})
	return m
}

// maxRequest bounds what is read of a request body.
const maxRequest = 1 << 20

func decodeBody(r *http.Request, v any) error {
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRequest)).Decode(v); err != nil {
		return fmt.Errorf("ghfake: bad request body: %w", err)
	}
	return nil
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), docREST)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.tokens[req.Token]
	switch {
	case !validScope(req.Scope) || strings.TrimSpace(req.Name) == "":
		writeError(w, http.StatusBadRequest, "ghfake: a registration needs a scope and a name", docREST)
		return
	case !ok || tok.scope != key(req.Scope) || time.Now().After(tok.expires):
		writeError(w, http.StatusNotFound, "Not Found", docREST)
		return
	}
	replaced := false
	for _, old := range s.sortedRunnersLocked() {
		if strings.EqualFold(old.scope, req.Scope) && strings.EqualFold(old.name, req.Name) {
			if !req.Replace {
				writeError(w, http.StatusConflict, "A runner exists with the same name", docREST)
				return
			}
			s.deleteRunnerLocked(old)
			replaced = true
		}
	}
	rn := s.newRunnerLocked(req.Scope, req.Name, req.Labels, req.Ephemeral)
	rn.secret = newUUID()
	s.notifyLocked()
	writeFakeJSON(w, http.StatusCreated, registerResponse{ID: rn.id, Name: rn.name, Secret: rn.secret, Replaced: replaced})
}

// newUUID returns a random UUID (version 4).
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// authRunnerLocked returns the runner that r's query names (runner=ID) if
// r carries its credential ("Authorization: Bearer SECRET").
func (s *Server) authRunnerLocked(r *http.Request) *runner {
	id, err := strconv.ParseInt(r.URL.Query().Get("runner"), 10, 64)
	if err != nil {
		return nil
	}
	rn := s.runners[id]
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if rn == nil || !ok || subtle.ConstantTimeCompare([]byte(secret), []byte(rn.secret)) != 1 {
		return nil
	}
	return rn
}

// A session is a listener's connection. Its fields are guarded by
// Server.mu.
type session struct {
	runnerID int64
	events   []event
	wake     chan struct{} // has a value when events has
	ended    chan struct{} // closed when the server ends the session
	isEnded  bool
}

func newSession(runnerID int64) *session {
	return &session{runnerID: runnerID, wake: make(chan struct{}, 1), ended: make(chan struct{})}
}

// push queues ev for the listener.
func (ss *session) push(ev event) {
	ss.events = append(ss.events, ev)
	select {
	case ss.wake <- struct{}{}:
	default:
	}
}

// end ends the session once its queued events are sent.
func (ss *session) end() {
	if !ss.isEnded {
		ss.isEnded = true
		close(ss.ended)
	}
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	ss, status, msg := s.openSession(r)
	if ss == nil {
		writeError(w, status, msg, docREST)
		return
	}
	defer s.closeSession(ss)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	s.streamEvents(w, rc, r, ss)
}

// openSession starts a session for the request's runner, which is then
// online. The query's job, if any, is the job the listener still runs
// after it lost its connection: if its run was cancelled meanwhile, or
// the job ended without it (force-cancelled, or lost), the listener is
// told to cancel it, before it is given a new job.
func (s *Server) openSession(r *http.Request) (*session, int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.authRunnerLocked(r)
	switch {
	case rn == nil:
		return nil, http.StatusForbidden, "Access denied: no such runner, or a wrong credential"
	case rn.sess != nil:
		return nil, http.StatusConflict, "A session for this runner already exists."
	}
	ss := newSession(rn.id)
	rn.sess, rn.online = ss, true
	jobID, _ := strconv.ParseInt(r.URL.Query().Get("job"), 10, 64)
	if j := s.jobs[jobID]; j != nil && j.runnerID == rn.id && (j.status == StatusCompleted || j.run.cancelling) {
		ss.push(event{Type: eventCancel, JobID: j.id})
	}
	s.dispatchLocked()
	s.notifyLocked()
	return ss, http.StatusOK, ""
}

// closeSession ends ss when its connection has: its runner, if ss is
// still its session, is offline.
func (s *Server) closeSession(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rn := s.runners[ss.runnerID]; rn != nil && rn.sess == ss {
		rn.sess, rn.online = nil, false
		s.notifyLocked()
	}
}

// streamEvents sends the session's events until the server ends it, the
// listener goes away, or the server closes.
func (s *Server) streamEvents(w io.Writer, rc *http.ResponseController, r *http.Request, ss *session) {
	enc := json.NewEncoder(w)
	for {
		select {
		case <-ss.wake:
		case <-ss.ended:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
		s.mu.Lock()
		evs, ended := ss.events, ss.isEnded
		ss.events = nil
		s.mu.Unlock()
		for _, ev := range evs {
			if enc.Encode(ev) != nil {
				return
			}
		}
		if rc.Flush() != nil || ended {
			return
		}
	}
}

func (s *Server) handleComplete(w http.ResponseWriter, r *http.Request) {
	var req completeRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), docREST)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.authRunnerLocked(r)
	j := s.jobs[req.JobID]
	conclusion, annotation, ok := conclusionOf(req.Result, j != nil && j.run.cancelling)
	switch {
	case rn == nil:
		writeError(w, http.StatusForbidden, "Access denied", docREST)
	case j == nil || j.runnerID != rn.id:
		writeError(w, http.StatusNotFound, "Not Found", docREST)
	case !ok:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("ghfake: unknown result %q", req.Result), docREST)
	case j.status != StatusInProgress: // ended meanwhile, by LoseRunner or a force-cancel
		if rn.ephemeral { // GitHub removes an ephemeral runner after its job
			s.deleteRunnerLocked(rn)
			s.notifyLocked()
		}
		writeFakeJSON(w, http.StatusConflict, completeResponse{Conclusion: j.conclusion})
	default:
		s.completeJobLocked(j, conclusion, annotation)
		if rn.ephemeral {
			s.deleteRunnerLocked(rn)
		}
		s.dispatchLocked()
		s.notifyLocked()
		writeFakeJSON(w, http.StatusOK, completeResponse{Conclusion: j.conclusion})
	}
}

// conclusionOf returns the conclusion and annotation of a job that ended
// with result; a job whose runner was stopped was cancelled if its run
// was, else it failed, as GitHub records it.
func conclusionOf(result string, cancelling bool) (conclusion, annotation string, ok bool) {
	switch result {
	case resultSucceeded:
		return ConclusionSuccess, "", true
	case resultFailed:
		return ConclusionFailure, "", true
	case resultCancelled:
		return ConclusionCancelled, "", true
	case resultShutdown:
		if cancelling {
			return ConclusionCancelled, "", true
		}
		return ConclusionFailure, ShutdownMessage, true
	}
	return "", "", false
}

// handleOffline ends a listener's session: its runner is offline. A job
// given to it that it never took (it was stopping) is queued again.
func (s *Server) handleOffline(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.authRunnerLocked(r)
	if rn == nil {
		writeError(w, http.StatusForbidden, "Access denied", docREST)
		return
	}
	if rn.sess != nil {
		rn.sess.end()
		rn.sess = nil
	}
	rn.online = false
	for _, run := range s.runs {
		for _, j := range run.latest() {
			if j.runnerID == rn.id && j.status == StatusInProgress {
				s.requeueLocked(j)
			}
		}
	}
	s.dispatchLocked()
	s.notifyLocked()
	w.WriteHeader(http.StatusNoContent)
}

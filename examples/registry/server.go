package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// maxBody bounds a request body. A runner reports only the tail of a job's
// output, so real requests are far smaller.
const maxBody = 1 << 20

// Server is the registry: an [http.Handler] serving the API described in
// the package README, backed by a state file.
//
// Changes are serialised and each one is written to the state file before
// it is answered; if that write fails the change is not applied and the
// request fails with status 500, so what the Server answers and what a
// restarted Server loads always agree. A Server is safe for concurrent use.
type Server struct {
	// Logger receives one line per change of state (runner registered, job
	// claimed, ...). Nil means discard. Set it before the Server handles its
	// first request.
	Logger *slog.Logger

	path string
	mux  *http.ServeMux

	mu sync.Mutex // serialises changes
	st *state     // committed: never modified, only replaced (see change)
}

// NewServer returns a Server that keeps its state in the file statePath: it
// loads the file if it exists, and starts empty if it does not (its directory
// must exist). A file that is not a valid state file is an error naming it;
// it is left as it is.
func NewServer(statePath string) (*Server, error) {
	if statePath == "" {
		return nil, errors.New("registry: empty state file path")
	}
	st, err := loadState(statePath)
	if err != nil {
		return nil, err
	}
	s := &Server{path: statePath, st: st, mux: http.NewServeMux()}

	// Each path gets its methods, plus a method-less pattern that answers
	// 405 in JSON (ServeMux's own 405 and 404 are plain text).
	routes := []struct {
		path     string
		handlers map[string]http.HandlerFunc
	}{
		{"/runners", map[string]http.HandlerFunc{"GET": s.listRunners, "POST": s.register}},
		{"/runners/{id}", map[string]http.HandlerFunc{"DELETE": s.remove}},
		{"/runners/{id}/claim", map[string]http.HandlerFunc{"POST": s.claim}},
		{"/jobs", map[string]http.HandlerFunc{"GET": s.listJobs, "POST": s.enqueue}},
		{"/jobs/{id}", map[string]http.HandlerFunc{"GET": s.getJob}},
		{"/jobs/{id}/result", map[string]http.HandlerFunc{"POST": s.report}},
	}
	for _, rt := range routes {
		var allow []string
		for method, h := range rt.handlers {
			s.mux.HandleFunc(method+" "+rt.path, h)
			allow = append(allow, method)
			if method == "GET" {
				allow = append(allow, "HEAD")
			}
		}
		slices.Sort(allow)
		s.mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, rt.path, strings.Join(allow, ", ")))
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such path: "+r.URL.Path)
	})
	return s, nil
}

// ServeHTTP serves the registry API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// current returns the committed state, which the caller must not modify.
func (s *Server) current() *state {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// apiError is a failed request: the status and message to answer with.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status, fmt.Sprintf(format, args...)}
}

// errUnchanged from a change function means: nothing to do, nothing to save.
var errUnchanged = errors.New("unchanged")

// change applies fn to a copy of the state and, if fn succeeds, writes the
// copy to the state file and makes it the committed state. Working on a copy
// is what makes a failed write leave memory as it was.
func (s *Server) change(fn func(st *state, now time.Time) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.st.clone()
	if err := fn(next, time.Now().UTC()); err != nil {
		return err
	}
	warning, err := next.save(s.path)
	if err != nil {
		s.log().Error("saving state failed; change not applied", "file", s.path, "err", err)
		return errorf(http.StatusInternalServerError, "saving state: %v", err)
	}
	if warning != nil {
		s.log().Warn("state saved but its directory could not be synced", "file", s.path, "err", warning)
	}
	s.st = next
	return nil
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name   string   `json:"name"`
		Labels []string `json:"labels"`
	}
	if !decode(w, r, &body) {
		return
	}
	if strings.TrimSpace(body.Name) == "" {
		writeError(w, http.StatusBadRequest, "name is empty")
		return
	}
	var reg Runner
	err := s.change(func(st *state, now time.Time) error {
		for _, old := range st.Runners {
			if old.Name == body.Name {
				return errorf(http.StatusConflict, "a runner named %q is registered: %s", body.Name, old.ID)
			}
		}
		reg = Runner{
			ID:           fmt.Sprintf("r-%d", st.NextRunner),
			Name:         body.Name,
			Labels:       append([]string{}, body.Labels...),
			RegisteredAt: now,
		}
		st.NextRunner++
		st.Runners = append(st.Runners, reg)
		return nil
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	s.log().Info("runner registered", "runner", reg.ID, "name", reg.Name, "labels", reg.Labels)
	writeJSON(w, http.StatusCreated, reg)
}

func (s *Server) listRunners(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	list := []Runner{}
	for _, rn := range s.current().Runners {
		if name == "" || rn.Name == name {
			list = append(list, rn)
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// reasonRemoved is the History reason of an attempt cut short by DELETE
// /runners/{id}.
const reasonRemoved = "runner removed while running the job"

func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var requeued string
	err := s.change(func(st *state, now time.Time) error {
		i, rn := st.runner(id)
		if rn == nil {
			return errorf(http.StatusNotFound, "no runner %s", id)
		}
		if rn.JobID != "" {
			requeued = rn.JobID
			endAttempt(st, st.job(rn.JobID), Result{RunnerID: id, State: JobInterrupted, Reason: reasonRemoved}, now)
		}
		st.Runners = append(st.Runners[:i], st.Runners[i+1:]...)
		return nil
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	if requeued != "" {
		s.log().Info("job re-queued", "job", requeued, "runner", id, "reason", reasonRemoved)
	}
	s.log().Info("runner removed", "runner", id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var job Job
	err := s.change(func(st *state, now time.Time) error {
		_, rn := st.runner(id)
		if rn == nil {
			return errorf(http.StatusNotFound, "no runner %s", id)
		}
		if rn.JobID != "" {
			return errorf(http.StatusConflict, "runner %s is already running job %s", id, rn.JobID)
		}
		for i := range st.Jobs {
			j := &st.Jobs[i]
			if j.State != JobQueued {
				continue
			}
			j.State = JobRunning
			j.RunnerID = id
			j.Attempts++
			j.AttemptStarted = now
			j.UpdatedAt = now
			rn.JobID = j.ID
			job = j.Job
			return nil
		}
		return errUnchanged
	})
	switch {
	case err == errUnchanged:
		w.WriteHeader(http.StatusNoContent)
	case err != nil:
		writeErr(w, err)
	default:
		s.log().Info("job claimed", "job", job.ID, "runner", id, "attempt", job.Attempts)
		writeJSON(w, http.StatusOK, job)
	}
}

func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Command string `json:"command"`
	}
	if !decode(w, r, &body) {
		return
	}
	if strings.TrimSpace(body.Command) == "" {
		writeError(w, http.StatusBadRequest, "command is empty")
		return
	}
	var job Job
	err := s.change(func(st *state, now time.Time) error {
		job = Job{
			ID:        fmt.Sprintf("j-%d", st.NextJob),
			Command:   body.Command,
			State:     JobQueued,
			History:   []Attempt{},
			CreatedAt: now,
			UpdatedAt: now,
		}
		st.NextJob++
		st.Jobs = append(st.Jobs, jobRecord{Job: job})
		return nil
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	s.log().Info("job queued", "job", job.ID, "command", job.Command)
	writeJSON(w, http.StatusCreated, job)
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	st := s.current()
	list := make([]Job, len(st.Jobs))
	for i, j := range st.Jobs {
		list[i] = j.Job
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	j := s.current().job(id)
	if j == nil {
		writeError(w, http.StatusNotFound, "no job "+id)
		return
	}
	writeJSON(w, http.StatusOK, j.Job)
}

func (s *Server) report(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var res Result
	if !decode(w, r, &res) {
		return
	}
	switch res.State {
	case JobSucceeded, JobFailed, JobInterrupted:
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("state %q: want succeeded, failed or interrupted", res.State))
		return
	}
	if res.State == JobInterrupted && res.Reason == "" {
		res.Reason = "interrupted by the runner"
	}
	var job Job
	err := s.change(func(st *state, now time.Time) error {
		j := st.job(id)
		switch {
		case j == nil:
			return errorf(http.StatusNotFound, "no job %s", id)
		case j.State != JobRunning:
			return errorf(http.StatusConflict, "job %s is %s, not running on runner %q", id, j.State, res.RunnerID)
		case j.RunnerID != res.RunnerID:
			return errorf(http.StatusConflict, "job %s is running on runner %s, not %q", id, j.RunnerID, res.RunnerID)
		}
		endAttempt(st, j, res, now)
		job = j.Job
		return nil
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	if res.State == JobInterrupted {
		s.log().Info("job re-queued", "job", id, "runner", res.RunnerID, "reason", res.Reason)
	} else {
		s.log().Info("job finished", "job", id, "runner", res.RunnerID, "state", res.State, "exit_code", fmtExit(res.ExitCode))
	}
	writeJSON(w, http.StatusOK, job)
}

// endAttempt records the end of j's running attempt, as res tells it, and
// frees its runner. An interrupted job is queued again.
func endAttempt(st *state, j *jobRecord, res Result, now time.Time) {
	j.History = append(j.History, Attempt{
		Attempt:  j.Attempts,
		RunnerID: j.RunnerID,
		State:    res.State,
		ExitCode: cloneInt(res.ExitCode),
		Reason:   res.Reason,
		Started:  j.AttemptStarted,
		Ended:    now,
	})
	if _, rn := st.runner(j.RunnerID); rn != nil {
		rn.JobID = ""
	}
	j.State = res.State
	if res.State == JobInterrupted {
		j.State = JobQueued
	}
	j.RunnerID = ""
	j.AttemptStarted = time.Time{}
	j.ExitCode = cloneInt(res.ExitCode)
	j.Output = tail(res.Output)
	j.UpdatedAt = now
}

// tail returns the last OutputLimit bytes of s, starting on a character
// boundary so that a character cut in two does not turn into U+FFFD.
func tail(s string) string {
	if len(s) <= OutputLimit {
		return s
	}
	s = s[len(s)-OutputLimit:]
	for i := 0; i < utf8.UTFMax && i < len(s); i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return s
}

func fmtExit(p *int) any {
	if p == nil {
		return "none"
	}
	return *p
}

// decode reads a JSON request body into v, or answers 400 (413 if too large)
// and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	err := dec.Decode(v)
	if err == nil && dec.Decode(&json.RawMessage{}) != io.EOF {
		err = errors.New("data after the JSON value")
	}
	if err == nil {
		return true
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", maxBody))
		return false
	}
	writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An error here is the client going away; there is no one to tell.
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
}

func writeErr(w http.ResponseWriter, err error) {
	if e, ok := errors.AsType[*apiError](err); ok {
		writeError(w, e.status, e.msg)
		return
	}
	writeError(w, http.StatusInternalServerError, err.Error())
}

package registry

import (
	"crypto/rand"
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

// Server is the registry: an [http.Handler] serving the API described in
// the package README, backed by a state file.
//
// Changes are serialised and each one is written to the state file before
// it is answered; if that write fails the change is not applied and the
// request fails with status 500, so what the Server answers and what a
// restarted Server loads always agree. A Server is safe for concurrent use.
// It starts no goroutine: leases are checked at each request (see
// [Config.Lease]).
type Server struct {
	// Logger receives one line per change of state (runner registered, job
	// claimed, ...). Nil means discard. Set it before the Server handles its
	// first request. Tokens are never logged.
	Logger *slog.Logger

	path      string
	cfg       Config
	adminHash string // of cfg.AdminToken; "" if none
	joinHash  string // of cfg.JoinToken; "" if none
	now       func() time.Time
	mux       *http.ServeMux

	mu     sync.Mutex           // serialises changes; guards what follows
	st     *state               // committed: never modified, only replaced (see change)
	leases map[string]time.Time // runner id → when its lease lapses
	heard  time.Time            // the last request (see expireLeases)
}

// NewServer returns a Server that keeps its state in the file statePath: it
// loads the file if it exists, and starts empty if it does not (its directory
// must exist). A file that is not a valid state file is an error naming it;
// it is left as it is. Temporary files left by a save that a crash cut short
// are removed. A nil cfg means the defaults.
func NewServer(statePath string, cfg *Config) (*Server, error) {
	return newServer(statePath, cfg, time.Now)
}

// newServer is NewServer with a clock, for tests.
func newServer(statePath string, cfg *Config, now func() time.Time) (*Server, error) {
	if statePath == "" {
		return nil, errors.New("registry: empty state file path")
	}
	st, err := loadState(statePath)
	if err != nil {
		return nil, err
	}
	s := &Server{path: statePath, cfg: cfg.withDefaults(), now: now, st: st, leases: map[string]time.Time{}, mux: http.NewServeMux()}
	if s.cfg.AdminToken != "" {
		s.adminHash = tokenHash(s.cfg.AdminToken)
	}
	if s.cfg.JoinToken != "" {
		s.joinHash = tokenHash(s.cfg.JoinToken)
	}
	s.heard = now()
	s.syncLeases()
	s.routes()
	return s, nil
}

// routes sets up the mux. Each path gets its methods, plus a method-less
// pattern that answers 405 in JSON (ServeMux's own 405 and 404 are plain
// text).
func (s *Server) routes() {
	routes := []struct {
		path     string
		handlers map[string]http.HandlerFunc
	}{
		{"/runners", map[string]http.HandlerFunc{"GET": s.listRunners, "POST": s.register}},
		{"/runners/{id}", map[string]http.HandlerFunc{"DELETE": s.remove}},
		{"/runners/{id}/claim", map[string]http.HandlerFunc{"POST": s.claim}},
		{"/runners/{id}/heartbeat", map[string]http.HandlerFunc{"POST": s.heartbeat}},
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
}

// ServeHTTP serves the registry API. Runners whose lease has lapsed are
// removed first.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.expireLeases()
	s.mux.ServeHTTP(w, r)
}

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
	return s.commit(fn)
}

// commit is change for a caller that holds s.mu.
func (s *Server) commit(fn func(st *state, now time.Time) error) error {
	next := s.st.clone()
	now := s.now().UTC()
	if err := fn(next, now); err != nil {
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
	s.syncLeases()
	return nil
}

// register registers a runner; it takes the join token or the admin
// token.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if err := s.requireJoin(bearer(r)); err != nil {
		writeErr(w, err)
		return
	}
	var body struct {
		Name   string   `json:"name"`
		Labels []string `json:"labels"`
	}
	if !s.decode(w, r, &body) {
		return
	}
	if err := checkRunner(body.Name, body.Labels); err != nil {
		writeErr(w, err)
		return
	}
	token := rand.Text()
	var reg Registration
	err := s.change(func(st *state, now time.Time) error {
		if len(st.Runners) >= s.cfg.MaxRunners {
			return errorf(http.StatusTooManyRequests, "%d runners are registered, the most this registry takes", len(st.Runners))
		}
		rn := runnerRecord{
			Runner: Runner{
				ID:           fmt.Sprintf("r-%d", st.NextRunner),
				Name:         body.Name,
				Labels:       append([]string{}, body.Labels...),
				RegisteredAt: now,
			},
			TokenHash: tokenHash(token),
		}
		st.NextRunner++
		st.Runners = append(st.Runners, rn)
		reg = Registration{Runner: rn.Runner, Token: token, LeaseMillis: s.cfg.Lease.Milliseconds()}
		return nil
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	s.log().Info("runner registered", "runner", reg.ID, "name", reg.Name, "labels", reg.Labels)
	writeJSON(w, http.StatusCreated, reg)
}

// checkRunner checks the name and labels a runner registers with.
func checkRunner(name string, labels []string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return errorf(http.StatusBadRequest, "name is empty")
	case len(name) > maxName:
		return errorf(http.StatusBadRequest, "name is %d bytes, longer than %d", len(name), maxName)
	case len(labels) > maxLabels:
		return errorf(http.StatusBadRequest, "%d labels, more than %d", len(labels), maxLabels)
	}
	for _, l := range labels {
		if len(l) > maxName {
			return errorf(http.StatusBadRequest, "a label is %d bytes, longer than %d", len(l), maxName)
		}
	}
	return nil
}

func (s *Server) listRunners(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	list := []Runner{}
	for _, rn := range s.current().Runners {
		if name == "" || rn.Name == name {
			list = append(list, rn.Runner)
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// reasonRemoved is the History reason of an attempt cut short by DELETE
// /runners/{id}.
const reasonRemoved = "runner removed while running the job"

// remove unregisters a runner: the runner itself, with its token, or
// anyone with the admin token.
func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	id, token := r.PathValue("id"), bearer(r)
	var requeued string
	err := s.change(func(st *state, now time.Time) error {
		if _, err := s.authRunner(st, id, token, true); err != nil {
			return err
		}
		requeued = removeRunner(st, id, reasonRemoved, now)
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

// removeRunner removes runner id, if it is there, re-queues its job with
// reason, and returns the job's id, or "" if it ran none.
func removeRunner(st *state, id, reason string, now time.Time) string {
	i, rn := st.runner(id)
	if rn == nil {
		return ""
	}
	requeued := rn.JobID
	if requeued != "" {
		endAttempt(st, st.job(requeued), Result{RunnerID: id, State: JobInterrupted, Reason: reason}, now)
	}
	st.Runners = append(st.Runners[:i], st.Runners[i+1:]...)
	return requeued
}

// heartbeat renews a runner's lease while it runs a job (its claims renew
// it while it is idle).
func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	id, token := r.PathValue("id"), bearer(r)
	err := s.change(func(st *state, now time.Time) error {
		if _, err := s.authRunner(st, id, token, false); err != nil {
			return err
		}
		s.renew(id)
		return errUnchanged
	})
	if err != errUnchanged {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	id, token := r.PathValue("id"), bearer(r)
	var job Job
	err := s.change(func(st *state, now time.Time) error {
		rn, err := s.authRunner(st, id, token, false)
		if err != nil {
			return err
		}
		s.renew(id)
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

// enqueue queues a job; it takes the admin token.
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) {
	if err := s.requireAdmin(bearer(r)); err != nil {
		writeErr(w, err)
		return
	}
	var body struct {
		Command string `json:"command"`
	}
	if !s.decode(w, r, &body) {
		return
	}
	switch {
	case strings.TrimSpace(body.Command) == "":
		writeError(w, http.StatusBadRequest, "command is empty")
		return
	case len(body.Command) > s.cfg.MaxCommand:
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("command is %d bytes, longer than %d", len(body.Command), s.cfg.MaxCommand))
		return
	}
	var job Job
	var forgot string
	err := s.change(func(st *state, now time.Time) error {
		if len(st.Jobs) >= s.cfg.MaxJobs {
			if forgot = forgetFinished(st); forgot == "" {
				return errorf(http.StatusTooManyRequests, "%d jobs are queued or running, the most this registry holds", len(st.Jobs))
			}
		}
		job = Job{ID: fmt.Sprintf("j-%d", st.NextJob), Command: body.Command, State: JobQueued, History: []Attempt{}, CreatedAt: now, UpdatedAt: now}
		st.NextJob++
		st.Jobs = append(st.Jobs, jobRecord{Job: job})
		return nil
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	if forgot != "" {
		s.log().Info("finished job forgotten to make room", "job", forgot, "max_jobs", s.cfg.MaxJobs)
	}
	s.log().Info("job queued", "job", job.ID, "command", job.Command)
	writeJSON(w, http.StatusCreated, job)
}

// forgetFinished removes the oldest finished job and returns its id, or
// "" if every job is queued or running.
func forgetFinished(st *state) string {
	for i, j := range st.Jobs {
		if j.State == JobSucceeded || j.State == JobFailed {
			st.Jobs = append(st.Jobs[:i], st.Jobs[i+1:]...)
			return j.ID
		}
	}
	return ""
}

// listJobs lists every job, with its output; it takes the admin token.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	if err := s.requireAdmin(bearer(r)); err != nil {
		writeErr(w, err)
		return
	}
	st := s.current()
	list := make([]Job, len(st.Jobs))
	for i, j := range st.Jobs {
		list[i] = j.Job
	}
	writeJSON(w, http.StatusOK, list)
}

// getJob returns one job; it takes the admin token or the token of a
// runner that runs it or ran it (see authJobReader).
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st := s.current()
	j := st.job(id)
	if err := s.authJobReader(st, j, bearer(r)); err != nil {
		writeErr(w, err)
		return
	}
	if j == nil {
		writeError(w, http.StatusNotFound, "no job "+id)
		return
	}
	writeJSON(w, http.StatusOK, j.Job)
}

// report records how an attempt ended; it takes the token of the runner
// that the result names.
func (s *Server) report(w http.ResponseWriter, r *http.Request) {
	id, token := r.PathValue("id"), bearer(r)
	var res Result
	if !s.decode(w, r, &res) {
		return
	}
	if err := s.checkResult(&res); err != nil {
		writeErr(w, err)
		return
	}
	var job Job
	err := s.change(func(st *state, now time.Time) error {
		if _, err := s.authRunner(st, res.RunnerID, token, false); err != nil {
			return err
		}
		s.renew(res.RunnerID)
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

// checkResult checks a result's state and the size of its output, and
// gives an interrupted attempt a reason if it has none.
func (s *Server) checkResult(res *Result) error {
	switch res.State {
	case JobSucceeded, JobFailed, JobInterrupted:
	default:
		return errorf(http.StatusBadRequest, "state %q: want succeeded, failed or interrupted", res.State)
	}
	if len(res.Output) > s.cfg.MaxOutput {
		return errorf(http.StatusRequestEntityTooLarge, "output is %d bytes, longer than %d: send its tail", len(res.Output), s.cfg.MaxOutput)
	}
	if res.State == JobInterrupted && res.Reason == "" {
		res.Reason = "interrupted by the runner"
	}
	// The reason goes into the job's History for good: keep it short.
	if len(res.Reason) > maxReason {
		res.Reason = strings.ToValidUTF8(res.Reason[:maxReason], "") + "…"
	}
	return nil
}

// maxReason bounds the reason kept for one attempt, and maxHistory the
// attempts kept per job (the oldest are forgotten), so that a job's record
// and the state file stay small whatever runners send.
const (
	maxReason  = 1 << 10
	maxHistory = 32
)

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
	if n := len(j.History); n > maxHistory {
		j.History = append(j.History[:0:0], j.History[n-maxHistory:]...)
	}
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
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	limit := s.cfg.bodyLimit()
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	err := dec.Decode(v)
	if err == nil && dec.Decode(&json.RawMessage{}) != io.EOF {
		err = errors.New("data after the JSON value")
	}
	if err == nil {
		return true
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", limit))
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
		if e.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", "Bearer")
		}
		writeError(w, e.status, e.msg)
		return
	}
	writeError(w, http.StatusInternalServerError, err.Error())
}

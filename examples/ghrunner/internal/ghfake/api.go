package ghfake

import (
	"cmp"
	"crypto/rand"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// apiRoutes returns the REST API's routes.
func (s *Server) apiRoutes() *http.ServeMux {
	m := http.NewServeMux()
	for _, scope := range []string{apiPrefix + "/repos/{owner}/{repo}", apiPrefix + "/orgs/{org}"} {
		m.HandleFunc("POST "+scope+"/actions/runners/registration-token", s.createToken)
		m.HandleFunc("GET "+scope+"/actions/runners", s.listRunners)
		m.HandleFunc("GET "+scope+"/actions/runners/{id}", s.getRunner)
		m.HandleFunc("DELETE "+scope+"/actions/runners/{id}", s.deleteRunner)
	}
	repo := apiPrefix + "/repos/{owner}/{repo}"
	m.HandleFunc("GET "+repo+"/actions/runs", s.listRuns)
	m.HandleFunc("GET "+repo+"/actions/runs/{id}", s.getRun)
	m.HandleFunc("GET "+repo+"/actions/runs/{id}/jobs", s.listJobs)
	m.HandleFunc("POST "+repo+"/actions/runs/{id}/cancel", s.cancelRun(false))
	m.HandleFunc("POST "+repo+"/actions/runs/{id}/force-cancel", s.cancelRun(true))
	m.HandleFunc("POST "+repo+"/actions/runs/{id}/rerun-failed-jobs", s.rerun(false))
	m.HandleFunc("POST "+repo+"/actions/runs/{id}/rerun", s.rerun(true))
	m.HandleFunc("GET "+repo+"/actions/jobs/{id}", s.getJob)
	m.HandleFunc("GET "+repo+"/check-runs/{id}/annotations", s.annotations)
	m.HandleFunc("GET "+apiPrefix+"/orgs/{org}/repos", s.orgRepos)
	m.HandleFunc(apiPrefix+"/", notFound)
	return m
}

func notFound(w http.ResponseWriter, _ *http.Request) {
	writeAPIError(w, http.StatusNotFound, "Not Found", docREST)
}

// scopeOf returns the scope of a request's path: "owner/repo" or "org".
func scopeOf(r *http.Request) string {
	if org := r.PathValue("org"); org != "" {
		return org
	}
	return r.PathValue("owner") + "/" + r.PathValue("repo")
}

// pathID returns the path's {id}.
func pathID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil && id > 0
}

// tokenChars are the characters of a registration token.
const tokenChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randomToken returns a registration token: 29 upper-case letters and
// digits, as GitHub's.
func randomToken() string {
	b := make([]byte, 29)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = tokenChars[int(b[i])%len(tokenChars)]
	}
	return string(b)
}

// tokenTTL is how long a registration token is valid, as on GitHub.
const tokenTTL = time.Hour

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	tok, exp := randomToken(), time.Now().Add(tokenTTL)
	s.mu.Lock()
	s.tokens[tok] = regToken{scope: key(scopeOf(r)), expires: exp}
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}{tok, stamp(exp)})
}

func (s *Server) listRunners(w http.ResponseWriter, r *http.Request) {
	scope, name := scopeOf(r), r.URL.Query().Get("name")
	out := []runnerJSON{}
	s.mu.Lock()
	for _, rn := range s.sortedRunnersLocked() {
		if strings.EqualFold(rn.scope, scope) && (name == "" || rn.name == name) {
			out = append(out, rn.json())
		}
	}
	s.mu.Unlock()
	lo, hi := paginate(w, r, len(out))
	writeJSON(w, http.StatusOK, runnersJSON{TotalCount: len(out), Runners: out[lo:hi]})
}

// scopedRunnerLocked returns the path's runner, if it is in the path's
// scope.
func (s *Server) scopedRunnerLocked(r *http.Request) *runner {
	id, ok := pathID(r)
	if !ok {
		return nil
	}
	rn := s.runners[id]
	if rn == nil || !strings.EqualFold(rn.scope, scopeOf(r)) {
		return nil
	}
	return rn
}

func (s *Server) getRunner(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rn := s.scopedRunnerLocked(r)
	var out runnerJSON
	if rn != nil {
		out = rn.json()
	}
	s.mu.Unlock()
	if rn == nil {
		notFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteRunner(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.scopedRunnerLocked(r)
	switch {
	case rn == nil:
		notFound(w, r)
	case rn.busy:
		doc := "https://docs.github.com/rest/actions/self-hosted-runners#delete-a-self-hosted-runner-from-a-repository"
		if r.PathValue("org") != "" {
			doc = "https://docs.github.com/rest/actions/self-hosted-runners#delete-a-self-hosted-runner-from-an-organization"
		}
		writeAPIError(w, http.StatusUnprocessableEntity, `Bad request - Runner "`+rn.name+`" is still running a job"`, doc)
	default:
		s.deleteRunnerLocked(rn)
		s.notifyLocked()
		w.WriteHeader(http.StatusNoContent)
	}
}

// Run statuses that the runs endpoint's status parameter takes as a
// status; any other value is taken as a conclusion.
var runStatuses = []string{StatusQueued, StatusInProgress, StatusCompleted, "requested", "waiting", "pending"}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	full, filter := scopeOf(r), r.URL.Query().Get("status")
	isStatus := slices.Contains(runStatuses, filter)
	out := []runJSON{}
	s.mu.Lock()
	for _, rn := range slices.Backward(s.runs) {
		match := filter == "" || (isStatus && rn.status == filter) || (!isStatus && rn.conclusion == filter)
		if match && strings.EqualFold(rn.repo.fullName(), full) {
			out = append(out, s.runJSON(rn))
		}
	}
	s.mu.Unlock()
	lo, hi := paginate(w, r, len(out))
	writeJSON(w, http.StatusOK, runsJSON{TotalCount: len(out), WorkflowRuns: out[lo:hi]})
}

// repoRunLocked returns the path's run, if it is of the path's repository.
func (s *Server) repoRunLocked(r *http.Request) *run {
	id, ok := pathID(r)
	if !ok {
		return nil
	}
	rn := s.runLocked(id)
	if rn == nil || !strings.EqualFold(rn.repo.fullName(), scopeOf(r)) {
		return nil
	}
	return rn
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.repoRunLocked(r)
	if rn == nil {
		notFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, s.runJSON(rn))
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	filter := r.URL.Query().Get("filter")
	if filter != "" && filter != "latest" && filter != "all" {
		writeAPIError(w, http.StatusUnprocessableEntity, "Invalid request.\n\nfilter must be one of: latest, all.",
			"https://docs.github.com/rest/actions/workflow-jobs#list-jobs-for-a-workflow-run")
		return
	}
	s.mu.Lock()
	rn := s.repoRunLocked(r)
	out := []jobJSON{}
	if rn != nil {
		jobs := rn.latest()
		if filter == "all" {
			jobs = rn.all()
		}
		for _, j := range jobs {
			out = append(out, s.jobJSON(j))
		}
	}
	s.mu.Unlock()
	if rn == nil {
		notFound(w, r)
		return
	}
	lo, hi := paginate(w, r, len(out))
	writeJSON(w, http.StatusOK, jobsJSON{TotalCount: len(out), Jobs: out[lo:hi]})
}

// cancelRun returns the handler of cancel, or of force-cancel if force.
func (s *Server) cancelRun(force bool) http.HandlerFunc {
	cancel, doc := s.cancelLocked, "https://docs.github.com/rest/actions/workflow-runs#cancel-a-workflow-run"
	if force {
		cancel, doc = s.forceCancelLocked, "https://docs.github.com/rest/actions/workflow-runs#force-cancel-a-workflow-run"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		rn := s.repoRunLocked(r)
		switch {
		case rn == nil:
			notFound(w, r)
		case !cancel(rn):
			writeAPIError(w, http.StatusConflict, "Cannot cancel a workflow run that is completed.", doc)
		default:
			s.notifyLocked()
			writeJSON(w, http.StatusAccepted, struct{}{})
		}
	}
}

// rerun returns the handler of rerun (all) or rerun-failed-jobs.
func (s *Server) rerun(all bool) http.HandlerFunc {
	doc := "https://docs.github.com/rest/actions/workflow-runs#re-run-failed-jobs-from-a-workflow-run"
	if all {
		doc = "https://docs.github.com/rest/actions/workflow-runs#re-run-a-workflow"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		rn := s.repoRunLocked(r)
		switch {
		case rn == nil:
			notFound(w, r)
		case !s.rerunLocked(rn, all):
			writeAPIError(w, http.StatusForbidden, "This workflow run cannot be retried", doc)
		default:
			s.notifyLocked()
			writeJSON(w, http.StatusCreated, struct{}{})
		}
	}
}

// repoJobLocked returns the path's job, if it is of the path's repository.
func (s *Server) repoJobLocked(r *http.Request) *job {
	id, ok := pathID(r)
	if !ok {
		return nil
	}
	j := s.jobs[id]
	if j == nil || !strings.EqualFold(j.run.repo.fullName(), scopeOf(r)) {
		return nil
	}
	return j
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.repoJobLocked(r)
	if j == nil {
		notFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, s.jobJSON(j))
}

func (s *Server) annotations(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.repoJobLocked(r)
	if j == nil {
		notFound(w, r)
		return
	}
	out := []annotationJSON{}
	for _, msg := range j.annotations {
		out = append(out, annotationJSON{Path: ".github", StartLine: 1, EndLine: 1, AnnotationLevel: "failure", Message: msg})
	}
	lo, hi := paginate(w, r, len(out))
	writeJSON(w, http.StatusOK, out[lo:hi])
}

// repoSorts are the orders that GET orgs/{org}/repos takes as sort,
// ascending.
var repoSorts = map[string]func(a, b *repo) int{
	"created": func(a, b *repo) int { return a.created.compare(b.created) },
	"updated": func(a, b *repo) int { return a.updated.compare(b.updated) },
	"pushed":  func(a, b *repo) int { return a.pushed.compare(b.pushed) },
	"full_name": func(a, b *repo) int {
		return cmp.Or(cmp.Compare(key(a.fullName()), key(b.fullName())), cmp.Compare(a.id, b.id))
	},
}

// orgRepos lists an organisation's repositories as GitHub does: by sort
// (created, the default; updated; pushed; full_name) in direction (desc
// by default, asc for full_name).
func (s *Server) orgRepos(w http.ResponseWriter, r *http.Request) {
	org, q := r.PathValue("org"), r.URL.Query()
	sort := cmp.Or(q.Get("sort"), "created")
	by, ok := repoSorts[sort]
	dir := q.Get("direction")
	if dir == "" {
		dir = "desc"
		if sort == "full_name" {
			dir = "asc"
		}
	}
	if !ok || (dir != "asc" && dir != "desc") {
		writeAPIError(w, http.StatusUnprocessableEntity,
			"Invalid request.\n\nsort must be one of: created, updated, pushed, full_name; direction one of: asc, desc.",
			"https://docs.github.com/rest/repos/repos#list-organization-repositories")
		return
	}
	s.mu.Lock()
	var repos []*repo
	for _, rp := range s.repos {
		if strings.EqualFold(rp.owner, org) {
			repos = append(repos, rp)
		}
	}
	slices.SortFunc(repos, by)
	if dir == "desc" {
		slices.Reverse(repos)
	}
	out := []repoJSON{}
	for _, rp := range repos {
		out = append(out, s.repoJSON(rp))
	}
	s.mu.Unlock()
	lo, hi := paginate(w, r, len(out))
	writeJSON(w, http.StatusOK, out[lo:hi])
}

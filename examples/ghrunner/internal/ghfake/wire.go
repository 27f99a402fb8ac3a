package ghfake

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// This file holds the REST API's JSON shapes, with GitHub's field names
// (those of go-github's Runner, WorkflowRun, WorkflowJob, Repository and
// CheckRunAnnotation), and its pagination.

type labelJSON struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

type runnerJSON struct {
	ID     int64       `json:"id"`
	Name   string      `json:"name"`
	OS     string      `json:"os"`
	Status string      `json:"status"`
	Busy   bool        `json:"busy"`
	Labels []labelJSON `json:"labels"`
}

type runnersJSON struct {
	TotalCount int          `json:"total_count"`
	Runners    []runnerJSON `json:"runners"`
}

type ownerJSON struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
	Type  string `json:"type"`
}

type repoJSON struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	FullName  string    `json:"full_name"`
	Private   bool      `json:"private"`
	Owner     ownerJSON `json:"owner"`
	HTMLURL   string    `json:"html_url"`
	URL       string    `json:"url"`
	CreatedAt string    `json:"created_at"`
	UpdatedAt string    `json:"updated_at"`
	PushedAt  string    `json:"pushed_at"`
}

type runJSON struct {
	ID                 int64    `json:"id"`
	Name               string   `json:"name"`
	NodeID             string   `json:"node_id"`
	HeadBranch         string   `json:"head_branch"`
	HeadSHA            string   `json:"head_sha"`
	Path               string   `json:"path"`
	DisplayTitle       string   `json:"display_title"`
	RunNumber          int      `json:"run_number"`
	RunAttempt         int      `json:"run_attempt"`
	Event              string   `json:"event"`
	Status             string   `json:"status"`
	Conclusion         *string  `json:"conclusion"`
	WorkflowID         int64    `json:"workflow_id"`
	URL                string   `json:"url"`
	HTMLURL            string   `json:"html_url"`
	CreatedAt          string   `json:"created_at"`
	UpdatedAt          string   `json:"updated_at"`
	RunStartedAt       string   `json:"run_started_at"`
	JobsURL            string   `json:"jobs_url"`
	CancelURL          string   `json:"cancel_url"`
	RerunURL           string   `json:"rerun_url"`
	PreviousAttemptURL *string  `json:"previous_attempt_url"`
	Repository         repoJSON `json:"repository"`
	HeadRepository     repoJSON `json:"head_repository"`
}

type runsJSON struct {
	TotalCount   int       `json:"total_count"`
	WorkflowRuns []runJSON `json:"workflow_runs"`
}

type jobJSON struct {
	ID              int64    `json:"id"`
	RunID           int64    `json:"run_id"`
	RunURL          string   `json:"run_url"`
	NodeID          string   `json:"node_id"`
	HeadBranch      string   `json:"head_branch"`
	HeadSHA         string   `json:"head_sha"`
	URL             string   `json:"url"`
	HTMLURL         string   `json:"html_url"`
	Status          string   `json:"status"`
	Conclusion      *string  `json:"conclusion"`
	CreatedAt       string   `json:"created_at"`
	StartedAt       string   `json:"started_at"`
	CompletedAt     *string  `json:"completed_at"`
	Name            string   `json:"name"`
	Steps           []any    `json:"steps"`
	CheckRunURL     string   `json:"check_run_url"`
	Labels          []string `json:"labels"`
	RunnerID        *int64   `json:"runner_id"`
	RunnerName      *string  `json:"runner_name"`
	RunnerGroupID   *int64   `json:"runner_group_id"`
	RunnerGroupName *string  `json:"runner_group_name"`
	RunAttempt      int      `json:"run_attempt"`
	WorkflowName    string   `json:"workflow_name"`
}

type jobsJSON struct {
	TotalCount int       `json:"total_count"`
	Jobs       []jobJSON `json:"jobs"`
}

type annotationJSON struct {
	Path            string `json:"path"`
	StartLine       int    `json:"start_line"`
	EndLine         int    `json:"end_line"`
	AnnotationLevel string `json:"annotation_level"`
	Message         string `json:"message"`
	Title           string `json:"title"`
	RawDetails      string `json:"raw_details"`
}

// stamp formats t as GitHub does.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// nullable returns nil for the zero value, which GitHub sends as null.
func nullable[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func (r *runner) json() runnerJSON {
	out := runnerJSON{ID: r.id, Name: r.name, OS: "linux", Status: "offline", Busy: r.busy, Labels: []labelJSON{}}
	if r.online {
		out.Status = "online"
	}
	for _, l := range r.labels {
		out.Labels = append(out.Labels, labelJSON{ID: l.id, Name: l.name, Type: l.typ})
	}
	return out
}

func (s *Server) repoJSON(rp *repo) repoJSON {
	return repoJSON{
		ID: rp.id, Name: rp.name, FullName: rp.fullName(),
		Owner:   ownerJSON{Login: rp.owner, ID: rp.id + 1_000_000, Type: "Organization"},
		HTMLURL: s.url + "/" + rp.fullName(), URL: s.APIURL() + "repos/" + rp.fullName(),
		CreatedAt: stamp(rp.created.at), UpdatedAt: stamp(rp.updated.at), PushedAt: stamp(rp.pushed.at),
	}
}

// headSHA is a commit id for run id.
func headSHA(id int64) string {
	sum := sha1.Sum([]byte(strconv.FormatInt(id, 10)))
	return hex.EncodeToString(sum[:])
}

func (s *Server) runJSON(rn *run) runJSON {
	api := s.APIURL() + "repos/" + rn.repo.fullName() + "/actions/runs/" + strconv.FormatInt(rn.id, 10)
	out := runJSON{
		ID: rn.id, Name: rn.name, NodeID: fmt.Sprintf("WFR_%d", rn.id), HeadBranch: "main",
		HeadSHA: headSHA(rn.id), Path: ".github/workflows/ci.yml", DisplayTitle: rn.name,
		RunNumber: rn.number, RunAttempt: rn.attempt, Event: "push", Status: rn.status,
		Conclusion: nullable(rn.conclusion), WorkflowID: 1, URL: api,
		HTMLURL:   s.url + "/" + rn.repo.fullName() + "/actions/runs/" + strconv.FormatInt(rn.id, 10),
		CreatedAt: stamp(rn.created), UpdatedAt: stamp(rn.updated), RunStartedAt: stamp(rn.started),
		JobsURL: api + "/jobs", CancelURL: api + "/cancel", RerunURL: api + "/rerun",
		Repository: s.repoJSON(rn.repo), HeadRepository: s.repoJSON(rn.repo),
	}
	if rn.attempt > 1 {
		prev := fmt.Sprintf("%s/attempts/%d", api, rn.attempt-1)
		out.PreviousAttemptURL = &prev
	}
	return out
}

func (s *Server) jobJSON(j *job) jobJSON {
	rn := j.run
	run := s.APIURL() + "repos/" + rn.repo.fullName() + "/actions/runs/" + strconv.FormatInt(rn.id, 10)
	id := strconv.FormatInt(j.id, 10)
	out := jobJSON{
		ID: j.id, RunID: rn.id, RunURL: run, NodeID: "CR_" + id, HeadBranch: "main", HeadSHA: headSHA(rn.id),
		URL:     s.APIURL() + "repos/" + rn.repo.fullName() + "/actions/jobs/" + id,
		HTMLURL: s.url + "/" + rn.repo.fullName() + "/actions/runs/" + strconv.FormatInt(rn.id, 10) + "/job/" + id,
		Status:  j.status, Conclusion: nullable(j.conclusion), CreatedAt: stamp(j.created),
		StartedAt: stamp(j.created), Name: j.name, Steps: []any{},
		CheckRunURL: s.APIURL() + "repos/" + rn.repo.fullName() + "/check-runs/" + id,
		Labels:      append([]string{}, j.labels...), RunnerID: nullable(j.runnerID),
		RunnerName: nullable(j.runnerName), RunAttempt: j.attempt, WorkflowName: rn.name,
	}
	if !j.started.IsZero() {
		out.StartedAt = stamp(j.started)
	}
	if !j.completed.IsZero() {
		out.CompletedAt = nullable(stamp(j.completed))
	}
	if j.runnerID != 0 {
		group, name := int64(1), "Default"
		out.RunnerGroupID, out.RunnerGroupName = &group, &name
	}
	return out
}

// Pagination as GitHub's: per_page 30 by default, at most 100.
const (
	defaultPerPage = 30
	maxPerPage     = 100
)

// paginate returns the bounds of r's page of n items, and sets the Link
// header to the other pages, as GitHub does.
func paginate(w http.ResponseWriter, r *http.Request, n int) (lo, hi int) {
	q := r.URL.Query()
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per < 1 {
		per = defaultPerPage
	}
	per = min(per, maxPerPage)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	last := max((n+per-1)/per, 1)
	page = min(page, last+1) // past the end: empty, and no overflow below
	var links []string
	link := func(p int, rel string) {
		q.Set("page", strconv.Itoa(p))
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawQuery: q.Encode()}
		links = append(links, fmt.Sprintf("<%s>; rel=%q", u.String(), rel))
	}
	if page > 1 {
		link(min(page-1, last), "prev")
	}
	if page < last {
		link(page+1, "next")
		link(last, "last")
	}
	if page > 1 {
		link(1, "first")
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	lo = min((page-1)*per, n)
	return lo, min(lo+per, n)
}

package ghfake

import (
	"fmt"
	"strings"
	"time"
)

// RunnerSpec describes a registration that [Server.AddRunner] makes, as
// if a runner had registered earlier. No listener is connected to it, so
// it takes no jobs.
type RunnerSpec struct {
	Name string
	// Labels are custom labels, besides "self-hosted", "Linux" and "X64",
	// which every runner has.
	Labels []string
	// Online and Busy are what GitHub says of the runner.
	Online, Busy bool
	// Ephemeral marks a runner registered with --ephemeral.
	Ephemeral bool
}

// RunSpec describes a workflow run that [Server.AddRun] adds.
type RunSpec struct {
	// Name is the workflow's name; "" means "CI".
	Name string
	// Jobs are the run's jobs; none means one job named "build".
	Jobs []JobSpec
}

// JobSpec describes a job of a [RunSpec].
type JobSpec struct {
	// Name is the job's name; "" means "build".
	Name string
	// Labels are its runs-on labels; none means "self-hosted".
	Labels []string
	// Duration is how long the job runs once a runner took it; 0 means
	// until its run is cancelled or its runner stops.
	Duration time.Duration
	// Fail makes the job fail when its Duration has passed.
	Fail bool
}

// Runner is a snapshot of a registration.
type Runner struct {
	ID        int64
	Name      string
	Scope     string   // "owner/repo" or "org"
	Labels    []string // "self-hosted", "Linux", "X64", then the custom ones
	Online    bool
	Busy      bool
	Ephemeral bool
	// Connected reports whether a listener holds a connection to the
	// server for this runner.
	Connected bool
}

// Run is a snapshot of a workflow run.
type Run struct {
	ID         int64
	Repo       string // "owner/repo"
	Name       string
	Number     int
	Attempt    int    // run_attempt: 1, then one more per re-run
	Status     string // StatusQueued, StatusInProgress or StatusCompleted
	Conclusion string // "" until completed
	// CancelRequested reports whether a cancel or a force-cancel was
	// requested, in any attempt.
	CancelRequested bool
	// ForceCancelled reports whether a force-cancel was accepted (POST
	// .../runs/{id}/force-cancel answered 202), in any attempt.
	ForceCancelled bool
	// Reruns has one entry per accepted re-run request: "failed" for
	// rerun-failed-jobs, "all" for rerun.
	Reruns []string
	// Jobs are the newest execution of each of the run's jobs, what the
	// jobs endpoint answers with filter=latest; AllJobs are every
	// execution, by id (filter=all).
	Jobs    []Job
	AllJobs []Job
}

// Job is a snapshot of one execution of a workflow job.
type Job struct {
	ID         int64
	RunID      int64
	Name       string
	Attempt    int // the run attempt it ran in
	Labels     []string
	Status     string
	Conclusion string // "" until completed
	RunnerID   int64  // 0 until a runner took it
	RunnerName string
	// Annotations are the messages of its check run's annotations.
	Annotations []string
}

// lostFormat is the annotation GitHub writes on a job whose runner went
// away.
const (
	lostFormat = "The self-hosted runner: %s lost communication with the server. " +
		"Verify the machine is running and has a healthy network connection. " +
		"Anything in your workflow that terminates the runner process, starves it for CPU/Memory, " +
		"or blocks its network access can cause this error."
)

// LostMessage returns the annotation GitHub writes on a job whose runner,
// named name, stopped talking to it.
func LostMessage(name string) string { return fmt.Sprintf(lostFormat, name) }

// ShutdownMessage is the annotation the runner writes on a job it was
// running when it was stopped (unless its run was cancelled).
const ShutdownMessage = "The runner has received a shutdown signal. This can happen when the runner " +
	"service is stopped, or a manually started runner is canceled."

// AddRunner adds a registration to scope ("owner/repo" or "org") and
// returns its id; 0 if scope is neither (nothing is added).
func (s *Server) AddRunner(scope string, r RunnerSpec) int64 {
	if !validScope(scope) {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.newRunnerLocked(scope, r.Name, r.Labels, r.Ephemeral)
	rn.online, rn.busy = r.Online, r.Busy
	s.notifyLocked()
	return rn.id
}

// AddRun adds a workflow run to repo ("owner/repo"), queued, and returns
// its id; 0 if repo is not "owner/repo" (nothing is added). Its jobs go
// to runners at once if some can take them.
func (s *Server) AddRun(repo string, r RunSpec) int64 {
	if !validScope(repo) || !strings.Contains(repo, "/") {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.newRunLocked(repo, r)
	s.updateRunLocked(rn)
	s.dispatchLocked()
	s.notifyLocked()
	return rn.id
}

// Push records a push to repo ("owner/repo"): its pushed_at and
// updated_at are now, which orders it first in GET orgs/{org}/repos with
// sort=pushed (or updated). A repository the server does not know yet is
// made, as AddRun makes one. Push does nothing if repo is not
// "owner/repo". Neither AddRun (but of a new repository) nor any run's
// activity changes pushed_at or updated_at, as on GitHub.
func (s *Server) Push(repo string) {
	if !validScope(repo) || !strings.Contains(repo, "/") {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repoLocked(repo)
	now := s.nowLocked()
	rp.pushed, rp.updated = now, now
	s.notifyLocked()
}

// AddLostJob adds to repo ("owner/repo") a completed run "CI", concluded
// failure, whose one job "build" ran on runner runnerID (named runnerName) and
// failed with the annotation GitHub writes when a runner lost
// communication with it (see [LostMessage]). It returns the run's and the
// job's id; zeros if repo is not "owner/repo".
func (s *Server) AddLostJob(repo string, runnerID int64, runnerName string) (runID, jobID int64) {
	if !validScope(repo) || !strings.Contains(repo, "/") {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.newRunLocked(repo, RunSpec{})
	j := rn.slots[0][0]
	j.status, j.runnerID, j.runnerName, j.started = StatusInProgress, runnerID, runnerName, time.Now()
	s.completeJobLocked(j, ConclusionFailure, LostMessage(runnerName))
	s.notifyLocked()
	return rn.id, j.id
}

// LoseRunner does what GitHub does some ten minutes after a runner
// vanished: the jobs in progress on runner id fail with the
// lost-communication annotation, and the runner, if still registered, is
// offline and not busy. It is meant for a runner whose listener is gone;
// one that is still connected has its connection ended, and reconnects.
func (s *Server) LoseRunner(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rn := range s.runs {
		for _, j := range rn.latest() {
			if j.runnerID == id && j.status == StatusInProgress {
				s.completeJobLocked(j, ConclusionFailure, LostMessage(j.runnerName))
			}
		}
	}
	if r := s.runners[id]; r != nil {
		r.online, r.busy = false, false
		if r.sess != nil {
			r.sess.end()
			r.sess = nil
		}
	}
	s.dispatchLocked()
	s.notifyLocked()
}

// FinishJob makes the job of run id that a runner's listener is running
// end now as it would once its Duration had passed: succeeded, or failed
// if its spec says Fail. It reports whether such a job was in progress;
// the listener ends it, and says so, a moment later.
func (s *Server) FinishJob(run int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.runLocked(run)
	if rn == nil {
		return false
	}
	for _, j := range rn.latest() {
		if r := s.runners[j.runnerID]; j.status == StatusInProgress && r != nil && r.sess != nil {
			r.sess.push(event{Type: eventFinish, JobID: j.id})
			return true
		}
	}
	return false
}

// Runner returns a snapshot of registration id; false if there is none
// (never was, or deleted).
func (s *Server) Runner(id int64) (Runner, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runners[id]
	if !ok {
		return Runner{}, false
	}
	return r.snapshot(), true
}

// Runners returns snapshots of every registration, by id.
func (s *Server) Runners() []Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Runner
	for _, r := range s.sortedRunnersLocked() {
		out = append(out, r.snapshot())
	}
	return out
}

// Run returns a snapshot of workflow run id; false if there is none.
func (s *Server) Run(id int64) (Run, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.runLocked(id)
	if rn == nil {
		return Run{}, false
	}
	return rn.snapshot(), true
}

// Calls returns every REST API request received so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

func (r *runner) snapshot() Runner {
	out := Runner{
		ID: r.id, Name: r.name, Scope: r.scope, Online: r.online, Busy: r.busy,
		Ephemeral: r.ephemeral, Connected: r.sess != nil,
	}
	for _, l := range r.labels {
		out.Labels = append(out.Labels, l.name)
	}
	return out
}

func (rn *run) snapshot() Run {
	out := Run{
		ID: rn.id, Repo: rn.repo.fullName(), Name: rn.name, Number: rn.number, Attempt: rn.attempt,
		Status: rn.status, Conclusion: rn.conclusion, CancelRequested: rn.cancelled, ForceCancelled: rn.forced,
		Reruns: append([]string(nil), rn.reruns...),
	}
	for _, j := range rn.latest() {
		out.Jobs = append(out.Jobs, j.snapshot())
	}
	for _, j := range rn.all() {
		out.AllJobs = append(out.AllJobs, j.snapshot())
	}
	return out
}

func (j *job) snapshot() Job {
	return Job{
		ID: j.id, RunID: j.run.id, Name: j.name, Attempt: j.attempt,
		Labels: append([]string(nil), j.labels...), Status: j.status, Conclusion: j.conclusion,
		RunnerID: j.runnerID, RunnerName: j.runnerName,
		Annotations: append([]string(nil), j.annotations...),
	}
}

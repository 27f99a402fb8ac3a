package ghfake

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// This file holds the state's transitions: runners registered and
// removed, runs added, jobs handed to runners and ended, runs cancelled
// and re-run. Every function here is called with Server.mu held; the
// caller calls notifyLocked.

// newRunnerLocked registers a runner.
func (s *Server) newRunnerLocked(scope, name string, custom []string, ephemeral bool) *runner {
	s.next.runner++
	r := &runner{id: s.next.runner, name: name, scope: scope, ephemeral: ephemeral}
	for _, n := range defaultLabels {
		r.labels = append(r.labels, label{id: s.labelIDLocked(n), name: n, typ: "read-only"})
	}
	for _, n := range custom {
		if n = strings.TrimSpace(n); n != "" && !r.hasLabel(n) {
			r.labels = append(r.labels, label{id: s.labelIDLocked(n), name: n, typ: "custom"})
		}
	}
	s.runners[r.id] = r
	return r
}

// labelIDLocked returns the id of the label named n, the same for every
// runner, as GitHub's are.
func (s *Server) labelIDLocked(n string) int64 {
	id, ok := s.labelIDs[key(n)]
	if !ok {
		s.next.label++
		id = s.next.label
		s.labelIDs[key(n)] = id
	}
	return id
}

func (r *runner) hasLabel(n string) bool {
	return slices.ContainsFunc(r.labels, func(l label) bool { return strings.EqualFold(l.name, n) })
}

// deleteRunnerLocked removes a registration; its listener, if connected,
// is told and disconnected.
func (s *Server) deleteRunnerLocked(r *runner) {
	delete(s.runners, r.id)
	if r.sess != nil {
		r.sess.push(event{Type: eventDeleted})
		r.sess.end()
		r.sess = nil
	}
}

// repoLocked returns repository full ("owner/repo"), made on first use.
func (s *Server) repoLocked(full string) *repo {
	if rp, ok := s.repos[key(full)]; ok {
		return rp
	}
	owner, name, _ := strings.Cut(full, "/")
	s.next.repo++
	now := s.nowLocked()
	rp := &repo{id: s.next.repo, owner: owner, name: name, created: now, updated: now, pushed: now}
	s.repos[key(full)] = rp
	return rp
}

// newRunLocked adds a run of spec to repository full, its jobs queued.
func (s *Server) newRunLocked(full string, spec RunSpec) *run {
	now := time.Now()
	rp := s.repoLocked(full)
	number := 1
	for _, rn := range s.runs {
		if rn.repo == rp {
			number++
		}
	}
	s.next.run++
	rn := &run{
		id: s.next.run, repo: rp, name: cmp.Or(spec.Name, "CI"), number: number, attempt: 1,
		status: StatusQueued, created: now, updated: now, started: now,
	}
	specs := spec.Jobs
	if len(specs) == 0 {
		specs = []JobSpec{{}}
	}
	for i, js := range specs {
		j := &job{
			run: rn, slot: i, name: cmp.Or(js.Name, "build"), labels: slices.Clone(js.Labels),
			duration: js.Duration, fail: js.Fail,
		}
		if len(j.labels) == 0 {
			j.labels = []string{"self-hosted"}
		}
		rn.slots = append(rn.slots, []*job{j})
		s.queueLocked(j, 1)
	}
	s.runs = append(s.runs, rn)
	return rn
}

// queueLocked gives j a new id and queues it in attempt.
func (s *Server) queueLocked(j *job, attempt int) {
	s.next.job++
	j.id, j.attempt, j.status, j.created = s.next.job, attempt, StatusQueued, time.Now()
	s.jobs[j.id] = j
}

// runLocked returns run id, or nil.
func (s *Server) runLocked(id int64) *run {
	for _, rn := range s.runs {
		if rn.id == id {
			return rn
		}
	}
	return nil
}

// dispatchLocked hands queued jobs, oldest run first, to idle runners
// that can take them.
func (s *Server) dispatchLocked() {
	var idle []*runner
	for _, r := range s.sortedRunnersLocked() {
		if r.sess != nil && r.online && !r.busy && !r.spent {
			idle = append(idle, r)
		}
	}
	for _, rn := range s.runs {
		for _, j := range rn.latest() {
			if j.status != StatusQueued {
				continue
			}
			i := slices.IndexFunc(idle, func(r *runner) bool { return r.canRun(j) })
			if i >= 0 {
				s.assignLocked(j, idle[i])
				idle = slices.Delete(idle, i, i+1)
			}
		}
	}
}

// canRun reports whether r may take j: j's repository is in r's scope and
// r has all of j's labels.
func (r *runner) canRun(j *job) bool {
	if !covers(r.scope, j.run.repo.fullName()) {
		return false
	}
	for _, l := range j.labels {
		if !r.hasLabel(l) {
			return false
		}
	}
	return true
}

// assignLocked starts j on r and tells r's listener.
func (s *Server) assignLocked(j *job, r *runner) {
	j.status, j.started, j.runnerID, j.runnerName = StatusInProgress, time.Now(), r.id, r.name
	r.busy, r.spent = true, r.ephemeral // an ephemeral runner takes one job, ever
	s.updateRunLocked(j.run)
	r.sess.push(event{Type: eventJob, Job: &jobEvent{
		ID: j.id, RunID: j.run.id, Repo: j.run.repo.fullName(), Name: j.name,
		Duration: j.duration, Fail: j.fail,
	}})
}

// completeJobLocked ends j with conclusion and, if not "", an annotation;
// the runner it ran on is no longer busy.
func (s *Server) completeJobLocked(j *job, conclusion, annotation string) {
	j.status, j.conclusion, j.completed = StatusCompleted, conclusion, time.Now()
	if j.started.IsZero() {
		j.started = j.completed
	}
	if annotation != "" {
		j.annotations = append(j.annotations, annotation)
	}
	if r := s.runners[j.runnerID]; r != nil && j.runnerID != 0 {
		r.busy = false
	}
	s.updateRunLocked(j.run)
}

// requeueLocked puts j, which its runner never started, back in the queue.
func (s *Server) requeueLocked(j *job) {
	if r := s.runners[j.runnerID]; r != nil {
		r.busy, r.spent = false, false
	}
	j.status, j.runnerID, j.runnerName, j.started = StatusQueued, 0, "", time.Time{}
	s.updateRunLocked(j.run)
}

// updateRunLocked derives a run's status and conclusion from its jobs: it
// has completed when all of its jobs have, and is in progress once one of
// the current attempt's has started.
func (s *Server) updateRunLocked(rn *run) {
	rn.updated = time.Now()
	done, started := true, false
	for _, j := range rn.latest() {
		done = done && j.status == StatusCompleted
		started = started || (j.attempt == rn.attempt && j.status != StatusQueued)
	}
	switch {
	case done:
		rn.status, rn.conclusion = StatusCompleted, rn.conclude()
	case started:
		rn.status, rn.conclusion = StatusInProgress, ""
	default:
		rn.status, rn.conclusion = StatusQueued, ""
	}
}

// conclude returns a completed run's conclusion: cancelled if cancelled,
// else failure if a job failed, cancelled if one was, success otherwise.
func (rn *run) conclude() string {
	if rn.cancelling {
		return ConclusionCancelled
	}
	out := ConclusionSuccess
	for _, j := range rn.latest() {
		switch j.conclusion {
		case ConclusionFailure, "timed_out":
			return ConclusionFailure
		case ConclusionCancelled:
			out = ConclusionCancelled
		}
	}
	return out
}

// cancelLocked requests a run's cancel: its queued jobs are cancelled at
// once, its running ones when their listener has stopped them. It reports
// false if the run has completed.
func (s *Server) cancelLocked(rn *run) bool {
	if rn.status == StatusCompleted {
		return false
	}
	rn.cancelling, rn.cancelled = true, true
	for _, j := range rn.latest() {
		switch j.status {
		case StatusQueued:
			s.completeJobLocked(j, ConclusionCancelled, "")
		case StatusInProgress:
			if r := s.runners[j.runnerID]; r != nil && r.sess != nil {
				r.sess.push(event{Type: eventCancel, JobID: j.id})
			}
		}
	}
	s.updateRunLocked(rn)
	return true
}

// forceCancelLocked force-cancels a run, as GitHub's force-cancel does:
// every job of it that has not completed is cancelled at once, whether
// its runner is there or not (a connected listener is told), and its
// runner is free; the run completes, cancelled. It reports false if the
// run has completed.
func (s *Server) forceCancelLocked(rn *run) bool {
	if rn.status == StatusCompleted {
		return false
	}
	rn.cancelling, rn.cancelled, rn.forced = true, true, true
	for _, j := range rn.latest() {
		if j.status == StatusCompleted {
			continue
		}
		if r := s.runners[j.runnerID]; r != nil && r.sess != nil && j.status == StatusInProgress {
			r.sess.push(event{Type: eventCancel, JobID: j.id}) // before any new job for r
		}
		s.completeJobLocked(j, ConclusionCancelled, "")
	}
	s.updateRunLocked(rn)
	s.dispatchLocked()
	return true
}

// failed reports whether a job's conclusion makes it re-run by
// rerun-failed-jobs.
func failed(conclusion string) bool {
	return conclusion == ConclusionFailure || conclusion == ConclusionCancelled || conclusion == "timed_out"
}

// rerunLocked starts a new attempt of a completed run: every job if all,
// else the jobs that failed or were cancelled, get a new execution,
// queued; the others are carried over as they were. It reports false if
// the run cannot be retried.
func (s *Server) rerunLocked(rn *run, all bool) bool {
	if rn.status != StatusCompleted || (!all && !slices.ContainsFunc(rn.latest(), func(j *job) bool { return failed(j.conclusion) })) {
		return false
	}
	rn.attempt++
	rn.cancelling, rn.started = false, time.Now()
	for i, slot := range rn.slots {
		old := slot[len(slot)-1]
		if !all && !failed(old.conclusion) {
			continue
		}
		j := &job{run: rn, slot: i, name: old.name, labels: old.labels, duration: old.duration, fail: old.fail}
		s.queueLocked(j, rn.attempt)
		rn.slots[i] = append(rn.slots[i], j)
	}
	if all {
		rn.reruns = append(rn.reruns, "all")
	} else {
		rn.reruns = append(rn.reruns, "failed")
	}
	s.updateRunLocked(rn)
	s.dispatchLocked()
	return true
}

//go:build unix

package supervisor

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// The results in ghrunner's metrics.
const (
	resultOK     = "ok"
	resultFailed = "failed"
	// resultMaxAttempts: the run was not re-run, having had
	// -max-attempts attempts.
	resultMaxAttempts = "max_attempts"
	// resultKept: the registration was kept on purpose, for the next
	// start to re-run the job run.sh was stopped in, which was not found.
	resultKept = "kept"
)

// jobResults are the results the listener gives a job that completed,
// and their label values in ghrunner_jobs_completed_total.
var jobResults = map[string]string{
	"Succeeded":           "succeeded",
	"SucceededWithIssues": "succeeded_with_issues",
	"Failed":              "failed",
	"Canceled":            "canceled",
	"Skipped":             "skipped",
	"Abandoned":           "abandoned",
}

// metrics are ghrunner's own metrics (termsig's are internal/ops'). A nil
// *metrics counts nothing.
type metrics struct {
	started         prometheus.Counter
	completed       *prometheus.CounterVec
	reruns          *prometheus.CounterVec
	unregistrations *prometheus.CounterVec
	releases        *prometheus.CounterVec
}

// newMetrics registers ghrunner's metrics on reg; nil: none. Every series
// starts at 0, so that a query sees it before the first event.
func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ghrunner_jobs_started_total",
			Help: "Jobs run.sh's listener said it took.",
		}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ghrunner_jobs_completed_total",
			Help: "Jobs run.sh's listener said completed, by its result: succeeded, succeeded_with_issues, failed, canceled, skipped, abandoned.",
		}, []string{"result"}),
		reruns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ghrunner_reruns_total",
			Help: "Re-runs of interrupted workflow runs (after a notice, or left by a stale runner at the start), by result: ok (requested), failed (the request, or what it waits for, failed or ran out of time), max_attempts (not re-run: -max-attempts reached).",
		}, []string{"result"}),
		unregistrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ghrunner_unregistrations_total",
			Help: "Removals of the runner's registration as it leaves, by result: ok, failed, kept (kept on purpose for the next start, to re-run a job that was not found).",
		}, []string{"result"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ghrunner_releases_total",
			Help: "Notices released (termsig's Notifier.Release: a held termination, logind's delay lock) once the cleanup is done, by result: ok, failed. A source that holds nothing, such as signal, counts as ok.",
		}, []string{"result"}),
	}
	reg.MustRegister(m.started, m.completed, m.reruns, m.unregistrations, m.releases)
	for _, r := range jobResults {
		m.completed.WithLabelValues(r)
	}
	for _, r := range []string{resultOK, resultFailed, resultMaxAttempts} {
		m.reruns.WithLabelValues(r)
	}
	for _, r := range []string{resultOK, resultFailed, resultKept} {
		m.unregistrations.WithLabelValues(r)
	}
	for _, r := range []string{resultOK, resultFailed} {
		m.releases.WithLabelValues(r)
	}
	return m
}

// job counts what the listener says of a job: "" when it takes one, its
// result when one completes (runner.Dir.OnJob).
func (m *metrics) job(result string) {
	switch {
	case m == nil:
	case result == "":
		m.started.Inc()
	default:
		if v, ok := jobResults[result]; ok {
			m.completed.WithLabelValues(v).Inc()
		}
	}
}

func (m *metrics) rerun(result string) {
	if m != nil {
		m.reruns.WithLabelValues(result).Inc()
	}
}

func (m *metrics) unregistered(result string) {
	if m != nil {
		m.unregistrations.WithLabelValues(result).Inc()
	}
}

func (m *metrics) released(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.releases.WithLabelValues(resultFailed).Inc()
	} else {
		m.releases.WithLabelValues(resultOK).Inc()
	}
}

// okOr is resultOK without err, else resultFailed.
func okOr(err error) string {
	if err != nil {
		return resultFailed
	}
	return resultOK
}

// The outcomes ghrunner posts to the webhook (--webhook-url), after the
// notice of the cleanup, each with the runner's name ("runner") and its
// repository ("repo") or organisation ("org").
const (
	// OutcomeRerun: the interrupted job's run was re-run; fields "repo"
	// (the run's), "run", "attempt" (the new one) and "job" (its name).
	OutcomeRerun = "re-run requested"
	// OutcomeJobFinished: a held termination let the job finish; fields
	// "job" (its name) and "result" (the listener's: "Succeeded").
	OutcomeJobFinished = "job finished"
	// OutcomeUnregistered: the registration was removed; field
	// "runner_id".
	OutcomeUnregistered = "unregistered"
	// OutcomeUnfinished: the cleanup did not finish (exit 3); field
	// "steps", the names of the steps that did not.
	OutcomeUnfinished = "cleanup unfinished"
)

// errNotRegistered is /readyz's "registration" check until config.sh has
// registered the runner and run.sh runs, and once the registration is
// removed.
var errNotRegistered = errors.New("the runner is not registered with GitHub")

// registrationReady is /readyz's "registration" check; the probes call it
// from their own goroutines.
func (s *supervisor) registrationReady() error {
	if s.registered.Load() {
		return nil
	}
	return errNotRegistered
}

//go:build linux

package main

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/termsig/termsig"
)

// The results of what the runner hands back, in its metrics' result
// label.
const (
	resultOK = "ok"
	// resultGone: the CI service will never take it (the job is no longer
	// this runner's, or the service rejects the result), and it is dropped.
	resultGone = "gone"
	// resultFailed: not done before the runner left (the deadline came,
	// the CI service unreachable); a result stays in the state file for
	// the next start on this host.
	resultFailed = "failed"
)

// runnerMetrics are the runner's own metrics (termsig's are
// internal/ops'). A nil *runnerMetrics counts nothing.
type runnerMetrics struct {
	started         prometheus.Counter
	reports         *prometheus.CounterVec
	requeues        *prometheus.CounterVec
	unregistrations *prometheus.CounterVec
	releases        *prometheus.CounterVec
}

// newRunnerMetrics registers the runner's metrics on reg; nil: none.
// Every series starts at 0, so that a query sees it before the first
// event.
func newRunnerMetrics(reg prometheus.Registerer) *runnerMetrics {
	if reg == nil {
		return nil
	}
	m := &runnerMetrics{
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runner_jobs_started_total",
			Help: "Jobs claimed and started.",
		}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runner_job_reports_total",
			Help: "Results of jobs that ended by themselves (or could not start), delivered to the CI service, by result: ok, gone (the service will never take it: dropped), failed (not taken before the runner left: kept in the state file for the next start).",
		}, []string{"result"}),
		requeues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runner_job_requeues_total",
			Help: "Jobs handed back to the CI service's queue (stopped for a notice, or claimed as one came), by result: ok, gone, failed, as for runner_job_reports_total.",
		}, []string{"result"}),
		unregistrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runner_unregistrations_total",
			Help: "The runner removing its registration as it leaves, by result: ok, failed (not before the deadline: exit 3).",
		}, []string{"result"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runner_releases_total",
			Help: "Notices released (termsig's Notifier.Release: a held termination, logind's delay lock) once the work was handed back, by result: ok, failed. A source that holds nothing, such as signal, counts as ok.",
		}, []string{"result"}),
	}
	reg.MustRegister(m.started, m.reports, m.requeues, m.unregistrations, m.releases)
	for _, r := range []string{resultOK, resultGone, resultFailed} {
		m.reports.WithLabelValues(r)
		m.requeues.WithLabelValues(r)
	}
	for _, r := range []string{resultOK, resultFailed} {
		m.unregistrations.WithLabelValues(r)
		m.releases.WithLabelValues(r)
	}
	return m
}

func (m *runnerMetrics) jobStarted() {
	if m != nil {
		m.started.Inc()
	}
}

// delivered counts what became of a pending result: a re-queue when
// requeue, else a report.
func (m *runnerMetrics) delivered(requeue bool, result string) {
	switch {
	case m == nil:
	case requeue:
		m.requeues.WithLabelValues(result).Inc()
	default:
		m.reports.WithLabelValues(result).Inc()
	}
}

func (m *runnerMetrics) unregistered(result string) {
	if m != nil {
		m.unregistrations.WithLabelValues(result).Inc()
	}
}

func (m *runnerMetrics) released(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.releases.WithLabelValues(resultFailed).Inc()
	} else {
		m.releases.WithLabelValues(resultOK).Inc()
	}
}

// The outcomes the runner posts to the webhook (--webhook-url), each with
// the runner's name in field "runner", after the notice it left for.
const (
	// outcomeHandedBack: the job was re-queued; field "job".
	outcomeHandedBack = "job handed back"
	// outcomeFinished: a job that ended by itself while the runner was
	// leaving (a held termination let it finish, or it exited 0 in its
	// grace period) was reported; fields "job" and "status".
	outcomeFinished = "job finished"
	// outcomeUnregistered: the runner removed its registration; field
	// "runner_id".
	outcomeUnregistered = "unregistered"
	// outcomeLeftRegistered: the CI service could not be reached before
	// the deadline (exit 3); field "runner_id".
	outcomeLeftRegistered = "left registered"
)

// handedBack counts p, a pending result the CI service took (dropped nil)
// or will never take, and posts the outcome when the runner is leaving
// for a notice.
func (r *runner) handedBack(p *pendingReport, dropped error) {
	if dropped != nil {
		r.m.delivered(p.Requeue, resultGone)
		return
	}
	r.m.delivered(p.Requeue, resultOK)
	nt, ok := r.leavingFor()
	switch {
	case !ok:
	case p.Requeue:
		r.ops.Outcome(nt, outcomeHandedBack, map[string]string{"job": p.Job.ID})
	default:
		r.ops.Outcome(nt, outcomeFinished, map[string]string{"job": p.Job.ID, "status": p.Result.Status})
	}
}

// leavingFor returns the notice the runner is leaving for, if any: the
// one it drains for, or the one a hold goes by.
func (r *runner) leavingFor() (termsig.Notice, bool) {
	switch {
	case r.leaving != nil:
		return *r.leaving, true
	case r.holding != nil:
		return r.holding.binding(), true
	}
	return termsig.Notice{}, false
}

// errNotRegistered is /readyz's "registration" check while the runner
// holds no live registration: before it registers, while it registers
// again, and once it has unregistered.
var errNotRegistered = errors.New("not registered with the CI service")

// registrationReady is /readyz's "registration" check. The probes call it
// from their own goroutines.
func (r *runner) registrationReady() error {
	if r.registered.Load() {
		return nil
	}
	return errNotRegistered
}

package main

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The actions of kubedrain_node_actions_total: what a node write did, or
// would have done when it failed.
const (
	actCordon   = "cordon"   // set spec.unschedulable
	actUncordon = "uncordon" // lifted its own cordon
	actTaint    = "taint"    // set its taint, or changed its value
	actUntaint  = "untaint"  // removed its taint
	actLabel    = "label"    // set the load-balancer exclusion label
	actUnlabel  = "unlabel"  // removed its label
)

// The results of kubedrain_node_actions_total and
// kubedrain_evictions_total besides the evictions' own outcomes.
const (
	resultOK     = "ok"
	resultFailed = "failed"
	resultDryRun = "dry_run" // --dry-run: logged, not done
)

// The results of kubedrain_drain_duration_seconds.
const (
	drainDrained  = "drained"   // every pod that should go was evicted (or was gone)
	drainPodsLeft = "pods_left" // pods were left: refused by a budget, failing, or the pods could not be listed
)

// metrics are kubedrain's own metrics (termsig's are internal/ops'). A
// nil *metrics counts nothing: metrics are off, or a test's controller.
type metrics struct {
	actions   *prometheus.CounterVec
	evictions *prometheus.CounterVec
	drains    *prometheus.HistogramVec
	podsLeft  prometheus.Gauge
}

// newMetrics registers kubedrain's metrics on reg; nil: none. Every
// series starts at 0, so that a query sees it before the first notice.
func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubedrain_node_actions_total",
			Help: "Changes kubedrain made to its node, by action (cordon, uncordon, taint, untaint, label, unlabel) and result (ok; failed: the node patch that would have made it failed; dry_run).",
		}, []string{"action", "result"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubedrain_evictions_total",
			Help: "Pod evictions, by how each ended: evicted; refused (a PodDisruptionBudget answered 429 until the drain's end); failed (another error until then); gone (404, or the pod was replaced); dry_run.",
		}, []string{"result"}),
		drains: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubedrain_drain_duration_seconds",
			Help:    "Time from the notice's Observed to the end of the drain's evictions, by result: drained, or pods_left.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 90, 120, 300, 600, 1800, 3600},
		}, []string{"result"}),
		podsLeft: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubedrain_drain_pods_left",
			Help: "Pods left on the node at the end of the last drain: refused by a PodDisruptionBudget, or failing, until its end.",
		}),
	}
	reg.MustRegister(m.actions, m.evictions, m.drains, m.podsLeft)
	for _, a := range []string{actCordon, actUncordon, actTaint, actUntaint, actLabel, actUnlabel} {
		for _, r := range []string{resultOK, resultFailed, resultDryRun} {
			m.actions.WithLabelValues(a, r)
		}
	}
	for _, r := range []string{evicted.String(), refused.String(), failed.String(), gone.String(), resultDryRun} {
		m.evictions.WithLabelValues(r)
	}
	for _, r := range []string{drainDrained, drainPodsLeft} {
		m.drains.WithLabelValues(r)
	}
	return m
}

// wrote counts the actions of up, a node write that ended with err; a
// write that changed nothing counts nothing.
func (m *metrics) wrote(up update, err error, dryRun bool) {
	if m == nil || !up.wrote {
		return
	}
	result := resultOK
	switch {
	case err != nil:
		result = resultFailed
	case dryRun:
		result = resultDryRun
	}
	for _, a := range []struct {
		name string
		did  bool
	}{
		{actCordon, up.cordoned}, {actUncordon, up.uncordoned}, {actTaint, up.tainted},
		{actUntaint, up.untainted}, {actLabel, up.excluded}, {actUnlabel, up.included},
	} {
		if a.did {
			m.actions.WithLabelValues(a.name, result).Inc()
		}
	}
}

// evicted counts the end of one pod's eviction.
func (m *metrics) evicted(result string) {
	if m != nil {
		m.evictions.WithLabelValues(result).Inc()
	}
}

// drained observes the end of a drain's evictions, seconds after its
// notice was observed (negative: not known, not observed), with left
// pods left on the node (negative: not known, as the pods could not be
// listed; the drain counts as pods_left and the gauge stays as it was).
func (m *metrics) drained(seconds float64, left int) {
	if m == nil {
		return
	}
	result := drainDrained
	if left != 0 {
		result = drainPodsLeft
	}
	if seconds >= 0 {
		m.drains.WithLabelValues(result).Observe(seconds)
	}
	if left >= 0 {
		m.podsLeft.Set(float64(left))
	}
}

// String is the outcome's result label in kubedrain_evictions_total.
func (o outcome) String() string {
	return [...]string{"evicted", "gone", "refused", "failed"}[o]
}

//go:build unix

package main

import (
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/termsig/termsig"
)

// superviseMetrics are termsig supervise's own metrics (the library's
// are internal/ops'). A nil *superviseMetrics counts nothing.
type superviseMetrics struct {
	signals *prometheus.CounterVec
}

// newSuperviseMetrics registers supervise's metrics on reg; nil: none.
// The signals a run is sure to be asked about start at 0, so that a
// query sees the series before the first one is sent.
func newSuperviseMetrics(reg prometheus.Registerer, o *options) *superviseMetrics {
	if reg == nil {
		return nil
	}
	m := &superviseMetrics{
		signals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "termsig_supervise_signals_sent_total",
			Help: "Signals sent to the command, forwarded or for a notice (SIGCONT after each stop signal, SIGKILL to its process group).",
		}, []string{"signal"}),
	}
	reg.MustRegister(m.signals)
	for _, sig := range []syscall.Signal{o.signal, o.finish, syscall.SIGKILL} {
		if sig != 0 {
			m.signals.WithLabelValues(termsig.SignalName(sig))
		}
	}
	return m
}

func (m *superviseMetrics) sent(sig syscall.Signal) {
	if m != nil {
		m.signals.WithLabelValues(termsig.SignalName(sig)).Inc()
	}
}

// The results of a hook, in termsig_hook_runs_total.
const (
	hookOK      = "ok"
	hookFailed  = "failed"  // exited with a status other than 0, or could not start
	hookTimeout = "timeout" // killed at its timeout
)

// hookMetrics are termsig hook's own metrics. A nil *hookMetrics counts
// nothing.
type hookMetrics struct{ runs *prometheus.CounterVec }

// newHookMetrics registers hook's metrics on reg; nil: none.
func newHookMetrics(reg prometheus.Registerer) *hookMetrics {
	if reg == nil {
		return nil
	}
	m := &hookMetrics{runs: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "termsig_hook_runs_total",
		Help: "Hooks run, by result: ok, failed (a status other than 0, or not started) or timeout (killed at its timeout).",
	}, []string{"result"})}
	reg.MustRegister(m.runs)
	for _, r := range []string{hookOK, hookFailed, hookTimeout} {
		m.runs.WithLabelValues(r)
	}
	return m
}

func (m *hookMetrics) ran(result string) {
	if m != nil {
		m.runs.WithLabelValues(result).Inc()
	}
}

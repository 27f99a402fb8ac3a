package ops

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/termsig/termsig"
)

// MaxEventsPerSource bounds the event label values of each source in
// termsig_notices_total: event strings come from outside (Azure's
// scheduled/<EventId>, a new one per event), and each value is a time
// series kept for the life of the process. The first ones seen keep their
// value; later ones count as OtherEvent.
const MaxEventsPerSource = 64

// OtherEvent is the event label of the notices of a source past its
// first MaxEventsPerSource events.
const OtherEvent = "other"

// maxLabelLen bounds the bytes of a label value taken from a notice.
const maxLabelLen = 128

// Noticed counts nt in termsig_notices_total, and posts it to the
// webhook, if any, when it is imminent (a held notice once per hold), or
// advice when Config.Webhook.Advice asks. The program calls it for every
// notice it takes from the Notifier's C, before any filter of its own.
func (s *Server) Noticed(nt termsig.Notice) {
	if s == nil {
		return
	}
	source := labelValue(nt.Source)
	c, err := s.notices.GetMetricWithLabelValues(source, nt.Kind.String(), s.events.label(source, labelValue(nt.Event)))
	if err == nil {
		c.Inc()
	}
	s.post(nt)
}

// Acted observes, in termsig_notice_action_seconds, the time from nt's
// Observed to now. The program calls it once per notice, when it first
// acts on it (signals a command, starts a hook, writes a line, cordons a
// node); a notice without Observed (not from a Notifier) is not counted.
func (s *Server) Acted(nt termsig.Notice) {
	if s == nil || nt.Observed.IsZero() {
		return
	}
	s.action.Observe(max(s.now().Sub(nt.Observed).Seconds(), 0))
}

// eventLabels keeps the event label values of each source.
type eventLabels struct {
	mu   sync.Mutex
	seen map[string]map[string]struct{} // source -> events
}

// label returns event, or OtherEvent once source has MaxEventsPerSource
// other events.
func (e *eventLabels) label(source, event string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seen == nil {
		e.seen = map[string]map[string]struct{}{}
	}
	evs := e.seen[source]
	if evs == nil {
		evs = map[string]struct{}{}
		e.seen[source] = evs
	}
	if _, ok := evs[event]; ok {
		return event
	}
	if len(evs) >= MaxEventsPerSource {
		return OtherEvent
	}
	evs[event] = struct{}{}
	return event
}

// labelValue makes s a label value that client_golang takes (valid UTF-8)
// and that stays small.
func labelValue(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxLabelLen {
		return s
	}
	cut := maxLabelLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// states are the values of termsig_source_state's state label.
var states = []termsig.State{termsig.StateRunning, termsig.StateUnavailable, termsig.StateFailed, termsig.StateStopped}

// sourceCollector reads the Notifier's Status at each scrape.
type sourceCollector struct{ s *Server }

var (
	stateDesc = prometheus.NewDesc("termsig_source_state",
		"1 for the state each source is in (running, unavailable, failed, stopped), 0 for the others.",
		[]string{"source", "state"}, nil)
	heardDesc = prometheus.NewDesc("termsig_source_last_heard_timestamp_seconds",
		"When the source last heard from its origin (a notice, an answer); absent until it has.",
		[]string{"source"}, nil)
)

func (c sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- stateDesc
	ch <- heardDesc
}

func (c sourceCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.s.notifier.Load()
	if n == nil {
		return
	}
	for _, st := range n.Status() {
		name := labelValue(st.Name)
		for _, state := range states {
			v := 0.0
			if st.State == state {
				v = 1
			}
			if m, err := prometheus.NewConstMetric(stateDesc, prometheus.GaugeValue, v, name, state.String()); err == nil {
				ch <- m
			}
		}
		if !st.LastHeard.IsZero() {
			if m, err := prometheus.NewConstMetric(heardDesc, prometheus.GaugeValue, float64(st.LastHeard.UnixNano())/1e9, name); err == nil {
				ch <- m
			}
		}
	}
}

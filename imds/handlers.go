package imds

import (
	"sort"
	"strings"

	"github.com/termsig/termsig"
)

// The handlers turn the answers of one path into notices, and say whether
// the answer holds advice (Config.FastInterval). Each keeps what it has
// reported, so that an event seen on every poll is sent once; each is
// called by one poller goroutine only.

func newSpotHandler() func(bool, []byte) ([]termsig.Notice, bool, error) {
	reported := "" // the action reported and still pending
	return func(found bool, body []byte) ([]termsig.Notice, bool, error) {
		if !found {
			reported = ""
			return nil, false, nil
		}
		a, err := parseInstanceAction(body)
		if err != nil {
			return nil, false, err
		}
		if a.Action == reported {
			return nil, false, nil // the same interruption, maybe with a recomputed time
		}
		reported = a.Action
		return []termsig.Notice{{
			Kind:     a.Kind,
			Event:    eventSpot,
			Reason:   "spot interruption: " + a.Action,
			Deadline: a.Deadline,
			Raw:      string(body),
		}}, false, nil
	}
}

func newLifecycleHandler() func(bool, []byte) ([]termsig.Notice, bool, error) {
	last := ""
	return func(found bool, body []byte) ([]termsig.Notice, bool, error) {
		if !found {
			last = ""
			return nil, false, nil
		}
		state, err := parseLifecycle(body)
		if err != nil {
			return nil, false, err
		}
		prev := last
		last = state
		advice := movedOut(state)
		if state != "Terminated" || prev == "Terminated" {
			return nil, advice, nil
		}
		return []termsig.Notice{{
			Kind:   termsig.Terminate,
			Event:  eventLifecycle,
			Reason: "auto scaling: target lifecycle state Terminated",
			Raw:    string(body),
		}}, advice, nil
	}
}

// movedOut says whether a target lifecycle state is advice: the group is
// taking the instance out of service (Standby, Detached, a warm pool's
// Warmed:*) or ending it (Terminated). InService is not, nor is a word
// that is no lifecycle state, so that a stray answer cannot hold the fast
// mode.
func movedOut(state string) bool {
	switch state {
	case "Terminated", "Detached", "Standby":
		return true
	}
	return strings.HasPrefix(state, "Warmed:")
}

func newRebalanceHandler() func(bool, []byte) ([]termsig.Notice, bool, error) {
	seen := false
	return func(found bool, body []byte) ([]termsig.Notice, bool, error) {
		if !found {
			if !seen {
				return nil, false, nil
			}
			seen = false
			return []termsig.Notice{{Kind: termsig.Cleared, Event: eventRebalance, Reason: "rebalance recommendation withdrawn"}}, false, nil
		}
		at, err := parseRebalance(body)
		if err != nil {
			return nil, seen, err
		}
		if seen {
			return nil, true, nil
		}
		seen = true
		return []termsig.Notice{{
			Kind:   termsig.Rebalance,
			Event:  eventRebalance,
			Reason: "rebalance recommendation, noticeTime " + at,
			Raw:    string(body),
		}}, true, nil
	}
}

func newScheduledHandler() func(bool, []byte) ([]termsig.Notice, bool, error) {
	reported := map[string]string{} // EventId → NotBefore reported
	return func(found bool, body []byte) ([]termsig.Notice, bool, error) {
		if !found {
			// IMDS answers [] when nothing is scheduled; a 404 here says
			// nothing about the events, so it changes nothing.
			return nil, len(reported) > 0, nil
		}
		evs, err := parseScheduled(body)
		if err != nil {
			return nil, len(reported) > 0, err
		}
		now, order := byEventID(evs)
		// Ended events first, so that a replaced event reads as
		// "cleared, then new".
		notices := clearedEvents(reported, now, body)
		for _, id := range order {
			e := now[id]
			if nb, ok := reported[id]; !e.active() || ok && nb == e.NotBefore {
				continue
			}
			reported[id] = e.NotBefore
			notices = append(notices, maintenance(e, body))
		}
		return notices, len(reported) > 0, nil
	}
}

// byEventID returns one entry per EventId, and the ids in the order of
// the answer. If an answer lists an id twice, an active entry wins, so
// that the id does not flap.
func byEventID(evs []scheduledEvent) (map[string]scheduledEvent, []string) {
	now := map[string]scheduledEvent{}
	var order []string
	for _, e := range evs {
		prev, seen := now[e.EventID]
		if !seen {
			order = append(order, e.EventID)
		}
		if !seen || !prev.active() {
			now[e.EventID] = e
		}
	}
	return now, order
}

// clearedEvents removes from reported the events that are no longer
// active in now (canceled, completed or gone), and returns a Cleared notice
// for each, in EventId order.
func clearedEvents(reported map[string]string, now map[string]scheduledEvent, body []byte) []termsig.Notice {
	var ended []string
	for id := range reported {
		if e, ok := now[id]; !ok || !e.active() {
			ended = append(ended, id)
		}
	}
	sort.Strings(ended)
	var notices []termsig.Notice
	for _, id := range ended {
		delete(reported, id)
		why := "gone"
		if e, ok := now[id]; ok {
			why = strings.ToLower(e.State)
		}
		notices = append(notices, termsig.Notice{
			Kind:   termsig.Cleared,
			Event:  eventScheduled + id,
			Reason: "scheduled event " + id + " " + why,
			Raw:    string(body),
		})
	}
	return notices
}

// maintenance returns the Maintenance notice of an active event.
func maintenance(e scheduledEvent, body []byte) termsig.Notice {
	reason := e.Code + ": " + e.Description + " (" + e.EventID
	if e.NotAfter != "" {
		reason += ", until " + e.NotAfter
	}
	reason += ")"
	return termsig.Notice{
		Kind:     termsig.Maintenance,
		Event:    eventScheduled + e.EventID,
		Reason:   reason,
		Deadline: parseEventTime(e.NotBefore),
		Raw:      string(body),
	}
}

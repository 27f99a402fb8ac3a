package imds

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

// Real payloads, from the EC2 User Guide and the AWS metadata mock.
var (
	realInstanceAction = []string{
		`{"action": "terminate", "time": "2017-09-18T08:22:00Z"}`,
		`{"action":"stop","time":"2017-09-18T08:22:00Z"}`,
		`{"action": "hibernate", "time": "2020-06-04T08:22:00Z"}`,
	}
	realRebalance = []string{`{"noticeTime": "2020-10-27T08:22:00Z"}`}
	realScheduled = []string{
		`[]`,
		`[ {
    "NotBefore" : "21 Jan 2019 09:00:43 GMT",
    "Code" : "system-reboot",
    "Description" : "scheduled reboot",
    "EventId" : "instance-event-0d59937288b749b32",
    "NotAfter" : "21 Jan 2019 09:17:23 GMT",
    "State" : "active"
  } ]`,
		`[{"NotBefore":"21 Jan 2019 09:00:43 GMT","Code":"instance-retirement","Description":"retiring","EventId":"instance-event-1","State":"active"}]`,
		`[{"NotBefore":"21 Jan 2019 09:00:43 GMT","Code":"instance-stop","Description":"stop","EventId":"instance-event-2","NotAfter":"21 Jan 2019 09:17:23 GMT","State":"canceled"}]`,
	}
	realLifecycle = []string{"InService", "Terminated", "Detached", "Standby", "Warmed:Stopped", "Warmed:Running\n"}
)

func TestParseInstanceAction(t *testing.T) {
	a, err := parseInstanceAction([]byte(realInstanceAction[0]))
	require.NoError(t, err)
	assert.Equal(t, termsig.Terminate, a.Kind)
	assert.Equal(t, time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC), a.Deadline)

	for body, kind := range map[string]termsig.Kind{
		`{"action": "STOP", "time": "soon"}`:                         termsig.Stop,
		`{"action": "terminate"}`:                                    termsig.Terminate,
		`{"action": "terminate", "time": 1505722920}`:                termsig.Terminate,
		`{"action": "stop", "time": {"at": "2017-09-18T08:22:00Z"}}`: termsig.Stop,
		`{"action": "hibernate", "time": null}`:                      termsig.Hibernate,
		`{"action": "terminate", "time": ["2017-09-18T08:22:00Z"]}`:  termsig.Terminate,
		`{"action": "terminate", "time": false}`:                     termsig.Terminate,
	} {
		a, err = parseInstanceAction([]byte(body))
		if assert.NoError(t, err, "a known action is enough: %s", body) {
			assert.Equal(t, kind, a.Kind, body)
		}
		assert.True(t, a.Deadline.IsZero(), body)
	}

	for _, bad := range []string{
		``, `null`, `{}`, `[]`, `"terminate"`, `{"action": 1}`, `{"action": null}`, `{"action": "reboot"}`,
		`{"action": "reboot", "time": 1}`, `{"time": 1}`, `{"action":"terminate"} {}`, `<html>`,
		`{"action": "terminate", "time": }`,
	} {
		_, err := parseInstanceAction([]byte(bad))
		assert.ErrorIs(t, err, errBadPayload, bad)
	}
}

func TestParseScheduled(t *testing.T) {
	evs, err := parseScheduled([]byte(realScheduled[1]))
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, "instance-event-0d59937288b749b32", evs[0].EventID)
	assert.True(t, evs[0].active())
	assert.Equal(t, time.Date(2019, 1, 21, 9, 0, 43, 0, time.UTC), parseEventTime(evs[0].NotBefore).UTC())

	evs, err = parseScheduled([]byte(realScheduled[3]))
	require.NoError(t, err)
	assert.False(t, evs[0].active())

	for _, bad := range []string{``, `null`, `{}`, `[{}]`, `[{"Code": "x"}]`, `[] []`, `<html>`} {
		_, err := parseScheduled([]byte(bad))
		assert.ErrorIs(t, err, errBadPayload, bad)
	}
	assert.True(t, parseEventTime("garbage").IsZero())
}

func TestParseLifecycle(t *testing.T) {
	for _, s := range realLifecycle {
		_, err := parseLifecycle([]byte(s))
		assert.NoError(t, err, s)
	}
	for _, bad := range []string{"", "<html>", "In Service", "Terminated!", string(make([]byte, 100))} {
		_, err := parseLifecycle([]byte(bad))
		assert.ErrorIs(t, err, errBadPayload, bad)
	}
}

// The fuzz tests check the handlers, not only the parsers: whatever the
// bytes, no panic, and no notice unless the bytes really say so.

func FuzzInstanceAction(f *testing.F) {
	for _, s := range realInstanceAction {
		f.Add([]byte(s))
	}
	f.Add([]byte(`<html><body>Terminated</body></html>`))
	// Times that are not strings: still the action's notice, no deadline.
	f.Add([]byte(`{"action": "terminate", "time": 1505722920}`))
	f.Add([]byte(`{"action": "stop", "time": {"at": "2017-09-18T08:22:00Z"}}`))
	f.Add([]byte(`{"action": "hibernate", "time": null}`))
	f.Add([]byte(`{"action": "terminate"}`))
	f.Add([]byte(`{"action": "reboot", "time": 1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := parseInstanceAction(body)
		notices, advice, herr := newSpotHandler()(true, body)
		if advice {
			t.Fatalf("payload %q: a spot answer is never advice", body)
		}
		if err != nil {
			if !errors.Is(err, errBadPayload) || herr == nil || len(notices) != 0 {
				t.Fatalf("bad payload %q: err %v, handler %v, %v", body, err, herr, notices)
			}
			return
		}
		if len(notices) != 1 || !notices[0].Kind.Imminent() || notices[0].Kind != a.Kind || notices[0].Event != eventSpot {
			t.Fatalf("payload %q: notices %v", body, notices)
		}
	})
}

func FuzzRebalance(f *testing.F) {
	for _, s := range realRebalance {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := parseRebalance(body)
		notices, advice, herr := newRebalanceHandler()(true, body)
		if (err == nil) != (herr == nil) || advice != (err == nil) {
			t.Fatalf("payload %q: %v vs %v, advice %v", body, err, herr, advice)
		}
		for _, n := range notices {
			if n.Kind != termsig.Rebalance {
				t.Fatalf("payload %q: notice %v", body, n)
			}
		}
	})
}

func FuzzScheduled(f *testing.F) {
	for _, s := range realScheduled {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		handle := newScheduledHandler()
		// A bad payload after a real one must not clear anything.
		first, advice, err := handle(true, []byte(realScheduled[1]))
		if err != nil || len(first) != 1 || !advice {
			t.Fatalf("seed: %v %v, advice %v", first, err, advice)
		}
		notices, advice, err := handle(true, body)
		if _, perr := parseScheduled(body); perr != nil {
			if err == nil || len(notices) != 0 || !advice {
				t.Fatalf("bad payload %q gave %v, %v, advice %v", body, notices, err, advice)
			}
			return
		}
		for _, n := range notices {
			if n.Kind != termsig.Maintenance && n.Kind != termsig.Cleared || !strings.HasPrefix(n.Event, eventScheduled) {
				t.Fatalf("payload %q: notice %v", body, n)
			}
		}
	})
}

func FuzzLifecycle(f *testing.F) {
	for _, s := range realLifecycle {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		notices, advice, err := newLifecycleHandler()(true, body)
		state, perr := parseLifecycle(body)
		if (err == nil) != (perr == nil) || err == nil && advice != (state == "Terminated" || state == "Detached" || state == "Standby" || strings.HasPrefix(state, "Warmed:")) {
			t.Fatalf("payload %q: %v vs %v, advice %v", body, err, perr, advice)
		}
		if len(notices) > 0 && state != "Terminated" {
			t.Fatalf("payload %q (state %q): notices %v", body, state, notices)
		}
	})
}

// Throttling delays the urgent paths by seconds, not by MaxBackoff.
func TestUrgentBackoffLimit(t *testing.T) {
	cfg := Config{}.withDefaults()
	w := newWatcher(cfg, nil, nil)
	limits := map[string]time.Duration{}
	for _, p := range w.pollers {
		limits[p.path] = p.limit
	}
	assert.Equal(t, map[string]time.Duration{
		pathInstanceAction: 4 * time.Second,
		pathLifecycle:      4 * time.Second, // polled every 3 s while it answers 404
		pathRebalance:      DefaultMaxBackoff,
		pathScheduled:      DefaultMaxBackoff,
	}, limits)
}

// A rebalance recommendation whose noticeTime cannot be read is still a
// recommendation: the time only goes into the Reason.
func TestRebalanceTimeNotAString(t *testing.T) {
	for _, body := range []string{`{"noticeTime": 1603786920}`, `{"noticeTime": null}`, `{}`, `{"noticeTime": {"x": 1}}`} {
		notices, _, err := newRebalanceHandler()(true, []byte(body))
		if err != nil || len(notices) != 1 || notices[0].Kind != termsig.Rebalance {
			t.Errorf("%s: got %v, %v; want one Rebalance notice", body, notices, err)
		}
	}
	if _, err := parseRebalance([]byte(`[]`)); err == nil {
		t.Error("an array is not a recommendation")
	}
}

// The request budget of issue 14 at the default intervals: at most 2.5
// requests a second without advice, 10 with, whether the instance is in an
// Auto Scaling group or not, tokens included (one per TTL, five minutes).
func TestRequestBudget(t *testing.T) {
	w := newWatcher(Config{}.withDefaults(), nil, nil)
	rate := func(advised, grouped bool) float64 {
		r := 1 / (5 * time.Minute).Seconds()
		for _, p := range w.pollers {
			r += 1 / w.interval(p, advised, grouped).Seconds()
		}
		return r
	}
	for _, grouped := range []bool{false, true} {
		idle, fast := rate(false, grouped), rate(true, grouped)
		t.Logf("in a group %v: %.3f requests/s idle, %.3f under advice", grouped, idle, fast)
		assert.LessOrEqual(t, idle, 2.5)
		assert.LessOrEqual(t, fast, 10.0)
	}
}

// Polls fall on a grid that every path shares: the next poll is wait after
// the grid point of the last one, rounded up to the grid, so that it is
// never sooner than wait after a poll that started on time.
func TestNextIsOnTheGrid(t *testing.T) {
	w := newWatcher(Config{}.withDefaults(), nil, nil)
	o := w.origin
	at := func(d time.Duration) time.Time { return o.Add(d) }
	const ms = time.Millisecond
	for _, tc := range []struct {
		start, step, wait, want time.Duration
	}{
		{5*time.Second + 3*ms, time.Second, time.Second, 6 * time.Second},
		{5*time.Second + 3*ms, time.Second, 4 * time.Second, 9 * time.Second},       // backing off
		{6*time.Second + 3*ms, 3 * time.Second, 3 * time.Second, 9 * time.Second},   // with every third spot poll
		{6*time.Second + 3*ms, 3 * time.Second, 10 * time.Second, 18 * time.Second}, // MaxBackoff, rounded up to the grid
		{5*time.Second + 900*ms, time.Second, time.Second, 6 * time.Second},         // a late start catches up
		{5*time.Second + 3*ms, 250 * ms, 250 * ms, 5*time.Second + 250*ms},          // fast
		{0, time.Hour, time.Hour, time.Hour},                                        // the first poll
	} {
		assert.Equal(t, at(tc.want), w.next(at(tc.start), tc.step, tc.wait), "start %v, step %v, wait %v", tc.start, tc.step, tc.wait)
	}
}

// Watch accepts any interval from FloorInterval up: the poll after one is
// after it, whatever the interval (no overflow of the grid's arithmetic).
func TestNextPollIsAfterThisOne(t *testing.T) {
	origin := time.Now()
	w := &watcher{origin: origin}
	start := origin.Add(time.Second)
	for _, step := range []time.Duration{time.Hour * 1e6, 1 << 62, 200 * 365 * 24 * time.Hour, math.MaxInt64} {
		at := w.next(start, step, step)
		assert.True(t, at.After(start), "step %v: the next poll at %v is before this one", step, at.Sub(start))
	}
	// A backoff longer than its step.
	at := w.next(start, time.Hour*1e6, math.MaxInt64/2+1)
	assert.True(t, at.After(start), "the next poll at %v is before this one", at.Sub(start))
}

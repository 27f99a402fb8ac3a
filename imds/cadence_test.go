package imds_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/termsigtest"
)

// slowConfig polls the urgent paths once an hour unless advice holds, and
// the rest every 10 ms, so that a test sees from request counts alone
// which cadence the urgent paths are on.
func slowConfig() *imds.Config {
	return intervals(imds.Config{
		Interval:         time.Hour,
		AdvisoryInterval: 10 * time.Millisecond,
		RequestTimeout:   200 * time.Millisecond,
		MaxBackoff:       40 * time.Millisecond,
	}, 10*time.Millisecond, 10*time.Millisecond)
}

// intervals returns c with the fast and the maintenance intervals set.
func intervals(c imds.Config, fast, maintenance time.Duration) *imds.Config {
	c = imds.WithMaintenanceInterval(imds.WithFastInterval(c, fast), maintenance)
	return &c
}

// urgentStill checks that path is not polled while the advisory paths are
// polled a few times: the urgent paths are back at Interval. It first lets
// the source settle for two advisory polls, and allows one poll that was
// under way.
func (h *harness) urgentStill(path string) {
	h.t.Helper()
	h.polls(imdstest.PathRebalance, 2)
	before := h.srv.Requests(path)
	h.polls(imdstest.PathRebalance, 5)
	assert.LessOrEqual(h.t, h.srv.Requests(path), before+1, "%s polled at the fast cadence without advice", path)
}

// Each kind of advice makes the urgent paths poll at the fast interval from the
// moment it is seen (not after the Interval under way), and its end puts
// them back at Interval.
func TestFastWhileAdviceHolds(t *testing.T) {
	event := imdstest.ScheduledEvent{
		Code: "system-reboot", Description: "scheduled reboot", EventID: "instance-event-1",
		NotBefore: deadline, NotAfter: deadline.Add(2 * time.Hour),
	}
	for _, tc := range []struct {
		name          string
		advise, clear func(*imdstest.Server)
		notices       int // sent when the advice starts
	}{
		{"rebalance", func(s *imdstest.Server) { s.SetRebalance(deadline) }, (*imdstest.Server).ClearRebalance, 1},
		{"scheduled event", func(s *imdstest.Server) { s.SetScheduledEvents(event) }, func(s *imdstest.Server) { s.SetScheduledEvents() }, 1},
		{"lifecycle standby", func(s *imdstest.Server) { s.SetLifecycleState("Standby") }, func(s *imdstest.Server) { s.SetLifecycleState("InService") }, 0},
		{"lifecycle warmed", func(s *imdstest.Server) { s.SetLifecycleState("Warmed:Stopped") }, func(s *imdstest.Server) { s.SetLifecycleState("InService") }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, slowConfig(), nil)
			h.ready()
			h.urgentStill(imdstest.PathInstanceAction)

			tc.advise(h.srv)
			for range tc.notices {
				h.receive()
			}
			h.polls(imdstest.PathInstanceAction, 5)

			tc.clear(h.srv)
			if tc.notices > 0 {
				assert.Equal(t, termsig.Cleared, h.receive().Kind)
			} else {
				// The poll that sees InService is the last fast one.
				h.polls(imdstest.PathLifecycle, 1)
			}
			h.urgentStill(imdstest.PathInstanceAction)
			h.quiet()
		})
	}
}

// The lifecycle state is polled at AdvisoryInterval while it answers 404
// (advice or not: an instance in no group has no state to watch), and at
// Interval, or the fast interval under advice, once it has answered 200.
func TestLifecycleCadence(t *testing.T) {
	h := start(t, slowConfig(), nil)
	h.ready()
	h.polls(imdstest.PathLifecycle, 5) // every 10 ms although Interval is an hour

	h.srv.SetRebalance(deadline)
	h.receive()
	h.polls(imdstest.PathInstanceAction, 3)
	h.srv.SetLifecycleState("InService")
	h.polls(imdstest.PathLifecycle, 5) // fast, under advice
	h.srv.ClearRebalance()
	assert.Equal(t, termsig.Cleared, h.receive().Kind)
	h.urgentStill(imdstest.PathLifecycle)

	// Back to 404 (detached): still at Interval, the group may return.
	h.srv.SetLifecycleState("")
	h.urgentStill(imdstest.PathLifecycle)
	h.quiet()
}

// An error on an advisory path leaves the advice as it was: a bad answer
// or an outage does not read as "the risk is gone".
func TestAdviceSurvivesErrors(t *testing.T) {
	h := start(t, slowConfig(), nil)
	h.srv.SetRebalance(deadline)
	h.receive()
	h.polls(imdstest.PathInstanceAction, 3)
	h.srv.Inject(termsigtest.Fault{Key: imdstest.PathRebalance, Status: 503})
	h.polls(imdstest.PathRebalance, 3)
	h.polls(imdstest.PathInstanceAction, 5)
	h.quiet()
}

// ready waits for the source's first look.
func (h *harness) ready() {
	h.t.Helper()
	select {
	case <-h.n.Ready():
	case <-time.After(wait):
		require.Fail(h.t, "the source never had its first look")
	}
}

// A path that fails under advice and still fails when the advice clears
// backs off from Interval, not from the fast step it had reached.
func TestBackoffAfterAdviceClearsIsNoFasterThanInterval(t *testing.T) {
	h := start(t, slowConfig(), nil)
	h.ready()
	h.srv.SetRebalance(deadline)
	h.receive()
	h.polls(imdstest.PathInstanceAction, 3) // fast

	// A bad answer, which the SDK does not try again: one request a poll.
	h.srv.Inject(termsigtest.Fault{Key: imdstest.PathInstanceAction, Body: "<html>portal</html>"})
	h.polls(imdstest.PathInstanceAction, 4) // failing: 10, 20, 40, 40 ms

	h.srv.ClearRebalance()
	assert.Equal(t, termsig.Cleared, h.receive().Kind)
	// The poll set up under advice (at most MaxBackoff away) is still due.
	h.polls(imdstest.PathInstanceAction, 1)

	// From now on the path fails at idle: its wait is an hour or more.
	before := h.srv.Requests(imdstest.PathInstanceAction)
	h.polls(imdstest.PathRebalance, 60)
	assert.LessOrEqual(t, h.srv.Requests(imdstest.PathInstanceAction), before+1,
		"a failing spot path polled faster than Interval after the advice cleared")
}

// The lifecycle state in a group is an urgent path: its backoff is capped
// at 4×Interval, as Config.MaxBackoff says, whatever AdvisoryInterval is.
func TestLifecycleBackoffIsCappedAsUrgent(t *testing.T) {
	cfg := intervals(imds.Config{
		Interval:         10 * time.Millisecond,
		AdvisoryInterval: time.Second,
		RequestTimeout:   200 * time.Millisecond,
		MaxBackoff:       10 * time.Second,
	}, 10*time.Millisecond, 10*time.Millisecond) // the scheduled events: the clock
	h := start(t, cfg, func(s *imdstest.Server) { s.SetLifecycleState("InService") })
	h.ready()
	h.polls(imdstest.PathLifecycle, 3) // in a group: every Interval

	h.srv.Inject(termsigtest.Fault{Key: imdstest.PathLifecycle, Body: "<html>portal</html>"})
	h.polls(imdstest.PathLifecycle, 6) // the backoff reaches its cap

	// Capped at 40 ms, the path is polled about 25 times in a second;
	// capped at 1 s, once or twice.
	before := h.srv.Requests(imdstest.PathLifecycle)
	h.polls(imdstest.PathScheduled, 100) // at least 990 ms
	assert.GreaterOrEqual(t, h.srv.Requests(imdstest.PathLifecycle)-before, 8,
		"a failing lifecycle path in a group backs off beyond 4×Interval")
}

// Advice present at start puts the urgent paths at the fast interval (not at
// AdvisoryInterval, which is an hour here).
func TestAdviceAtStartIsFastInterval(t *testing.T) {
	cfg := intervals(imds.Config{
		Interval:         time.Hour,
		AdvisoryInterval: time.Hour,
		RequestTimeout:   200 * time.Millisecond,
		MaxBackoff:       40 * time.Millisecond,
	}, 10*time.Millisecond, 10*time.Millisecond)
	h := start(t, cfg, func(s *imdstest.Server) { s.SetRebalance(deadline) })
	h.ready()
	assert.Equal(t, termsig.Rebalance, h.receive().Kind)
	h.polls(imdstest.PathInstanceAction, 5)
	h.quiet()
}

// A lifecycle answer that is no lifecycle state, such as a proxy's word
// with status 200, is not advice: it cannot hold the fast mode.
func TestStrayLifecycleWordIsNoAdvice(t *testing.T) {
	h := start(t, slowConfig(), func(s *imdstest.Server) { s.SetLifecycleState("Forbidden") })
	h.ready() // the lifecycle state has been read
	h.urgentStill(imdstest.PathInstanceAction)
	h.quiet()
}

// A program may run with the timers of Go before 1.23 (GODEBUG
// asynctimerchan=1), whose Reset leaves a tick that came meanwhile in the
// channel: a poll slower than its interval that fails must still be
// followed by the backoff, not by a poll at once.
func TestBackoffAfterASlowFailureWithAsyncTimers(t *testing.T) {
	t.Setenv("GODEBUG", "asynctimerchan=1")
	cfg := &imds.Config{
		Events:   imds.SpotInterruption,
		Interval: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, // 200 ms at most: 4×Interval
		RequestTimeout: time.Second,
	}
	h := start(t, cfg, func(s *imdstest.Server) {
		s.Inject(termsigtest.Fault{Key: imdstest.PathInstanceAction, Delay: 75 * time.Millisecond, Status: 503})
	})
	h.polls(imdstest.PathInstanceAction, 4) // backoff at its cap
	t0 := time.Now()
	h.polls(imdstest.PathInstanceAction, 6)
	rate := 6 / time.Since(t0).Seconds()
	t.Logf("%.1f polls/s (a poll every 200 ms: 5/s; at once after each: 13/s)", rate)
	assert.Less(t, rate, 8.0)
	h.quiet()
}

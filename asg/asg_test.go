package asg_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/asg"
	"github.com/termsig/termsig/asg/asgtest"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/termsigtest"
)

// A scale-in of an instance whose group has a termination hook is one
// held Terminate, whose Deadline is a heartbeat timeout after the
// heartbeat the source records at once, and whose HoldLimit is the hook's
// global limit.
func TestScaleInIsAHeldTerminate(t *testing.T) {
	e := start(t, opts{})
	before := time.Now()
	nt := e.scaleIn()
	assert.Equal(t, asg.Name, nt.Source)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, asg.Event, nt.Event)
	assert.True(t, nt.Held, "the notice says the instance is held: %v", nt)
	assert.WithinRange(t, nt.Deadline, before.Add(time.Second), time.Now().Add(time.Second))
	// 100 × 1 s, from when the wait began (at most a poll before the
	// notice was seen).
	assert.WithinRange(t, nt.HoldLimit, before.Add(100*time.Second-time.Second), nt.Observed.Add(100*time.Second))
	assert.Contains(t, nt.Reason, hookName)
	assert.Len(t, e.calls("RecordLifecycleActionHeartbeat", true), 1)
	assert.Equal(t, "Terminating:Wait", e.api.State(imdstest.InstanceID))
}

// Until Release, the source keeps the hold with heartbeats and tells the
// consumer of each new Deadline; Release completes the hook with
// CONTINUE, by instance id, and no heartbeat follows.
func TestHoldIsKeptUntilRelease(t *testing.T) {
	e := start(t, opts{})
	first := e.scaleIn()
	last := first
	for range 4 {
		nt := e.next()
		assert.True(t, nt.Held)
		assert.Equal(t, asg.Event, nt.Event)
		assert.True(t, nt.Deadline.After(last.Deadline), "each later notice moves the Deadline: %v, then %v", last.Deadline, nt.Deadline)
		assert.Equal(t, first.HoldLimit, nt.HoldLimit)
		last = nt
	}
	require.NoError(t, e.release(last))
	completes := e.calls("CompleteLifecycleAction", true)
	require.Len(t, completes, 1)
	c := completes[0]
	assert.Equal(t, "CONTINUE", c.Result)
	assert.Equal(t, imdstest.InstanceID, c.InstanceID)
	assert.Equal(t, hookName, c.Hook)
	assert.Equal(t, group, c.Group)
	e.n.Stop()
	for _, hb := range e.calls("RecordLifecycleActionHeartbeat", true) {
		assert.False(t, hb.At.After(c.At), "a heartbeat was recorded after the completion")
	}
	assert.Equal(t, "Terminated", e.api.State(imdstest.InstanceID))
	assert.Zero(t, e.log.Count("asg: the hold lapsed before Release; the instance goes on"))
}

// Every termination hook of the group that holds the instance is kept and
// completed; a hook of another transition is left alone, and the Deadline
// is that of the hook that times out first.
func TestEveryTerminationHookIsHeldAndCompleted(t *testing.T) {
	e := start(t, opts{hooks: []asgtest.Hook{
		{Name: "short", HeartbeatTimeout: time.Second},
		{Name: "long", HeartbeatTimeout: 3 * time.Second},
		{Name: "launch", Transition: "autoscaling:EC2_INSTANCE_LAUNCHING", HeartbeatTimeout: time.Second},
	}})
	before := time.Now()
	nt := e.scaleIn()
	require.True(t, nt.Held)
	assert.WithinRange(t, nt.Deadline, before.Add(time.Second), time.Now().Add(time.Second))
	assert.True(t, nt.HoldLimit.Before(before.Add(101*time.Second)), "the hold's limit is the shortest hook's: %v", nt.HoldLimit)
	require.NoError(t, e.release(nt))
	var hooks []string
	for _, c := range e.calls("CompleteLifecycleAction", true) {
		hooks = append(hooks, c.Hook)
	}
	assert.ElementsMatch(t, []string{"short", "long"}, hooks)
	e.n.Stop()
	assert.Equal(t, "Terminated", e.api.State(imdstest.InstanceID))
}

// A group without a termination hook: the scale-in is a Terminate that
// says nothing holds the instance, without a Deadline, and is not held.
func TestScaleInWithoutHookSaysNothingHoldsIt(t *testing.T) {
	e := start(t, opts{noHook: true})
	nt := e.scaleIn()
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.False(t, nt.Held)
	assert.True(t, nt.Deadline.IsZero(), "no deadline is known: %v", nt.Deadline)
	assert.Contains(t, nt.Reason, "no termination lifecycle hook holds the instance")
	require.NoError(t, e.release(nt), "Release of what nothing holds does nothing")
	assert.Empty(t, e.calls("CompleteLifecycleAction", true))
	assertNoMoreNotices(t, e)
}

// MaxHold bounds the hold: no heartbeat takes the Deadline past it, and
// the last Deadline is the HoldLimit.
func TestMaxHoldBoundsTheHold(t *testing.T) {
	e := start(t, opts{cfg: func(c *asg.Config) { c.MaxHold = 2500 * time.Millisecond }})
	nt := e.scaleIn()
	require.True(t, nt.Held)
	assert.WithinDuration(t, nt.Observed.Add(2500*time.Millisecond), nt.HoldLimit, 100*time.Millisecond)
	for nt.Deadline.Before(nt.HoldLimit) {
		next := e.next()
		require.True(t, next.Held, "the hold ended before its limit: %v", next)
		assert.False(t, next.Deadline.After(nt.HoldLimit), "a Deadline past the HoldLimit")
		nt = next
	}
	e.log.WaitFor(t, "asg: the hold reached its limit; the instance goes on", 1)
	beats := len(e.calls("RecordLifecycleActionHeartbeat", true))
	e.n.Stop()
	assert.Equal(t, beats, len(e.calls("RecordLifecycleActionHeartbeat", true)))
	assert.Zero(t, e.log.Count("asg: the hold lapsed before Release; the instance goes on"))
}

// A hold completed by someone else (the instance went on): the source
// says so in its log and in a last notice that is not Held.
func TestLapsedHoldIsSaid(t *testing.T) {
	e := start(t, opts{})
	nt := e.scaleIn()
	require.True(t, nt.Held)
	_, err := e.sdk().CompleteLifecycleAction(context.Background(), &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String(hookName),
		InstanceId: aws.String(imdstest.InstanceID), LifecycleActionResult: aws.String("CONTINUE")})
	require.NoError(t, err)
	for nt.Held {
		nt = e.next()
	}
	assert.Equal(t, asg.Event, nt.Event)
	assert.Contains(t, nt.Reason, "lapsed")
	assert.False(t, nt.Deadline.IsZero())
	e.log.WaitFor(t, "asg: the hold lapsed before Release; the instance goes on", 1)
	assertNoMoreNotices(t, e)
}

// Throttled heartbeats are tried again within the hold: over a hold of
// several heartbeat timeouts with bursts of Throttling, the hold never
// lapses.
func TestThrottledHeartbeatsKeepTheHold(t *testing.T) {
	e := start(t, opts{})
	nt := e.scaleIn()
	require.True(t, nt.Held)
	for range 3 {
		e.api.Inject(asgtest.ErrorFault("RecordLifecycleActionHeartbeat", "Throttling", 3))
		n := len(e.calls("RecordLifecycleActionHeartbeat", true))
		e.awaitCalls("RecordLifecycleActionHeartbeat", n+2)
	}
	assert.Greater(t, e.api.Requests("RecordLifecycleActionHeartbeat"), len(e.calls("RecordLifecycleActionHeartbeat", true))+8,
		"the throttled heartbeats were not tried again")
	assert.Equal(t, "Terminating:Wait", e.api.State(imdstest.InstanceID), "the hold lapsed")
	for range len(e.n.C()) {
		got := <-e.n.C()
		assert.True(t, got.Held, "a notice that is not held: %v", got)
	}
	require.NoError(t, e.release(nt))
}

// AccessDenied names the IAM action in Status, and the scale-in is still
// a notice, from IMDS alone.
func TestAccessDeniedIsNamedAndTheNoticeStillComes(t *testing.T) {
	for _, action := range []string{"DescribeAutoScalingInstances", "DescribeLifecycleHooks", "RecordLifecycleActionHeartbeat"} {
		t.Run(action, func(t *testing.T) {
			e := start(t, opts{before: func(e *env) { e.api.Deny(action) }})
			nt := e.scaleIn()
			assert.Equal(t, termsig.Terminate, nt.Kind)
			assert.False(t, nt.Held)
			assert.Contains(t, nt.Reason, "autoscaling:"+action)
			waitStatus(t, e, "access denied to autoscaling:"+action)
		})
	}
}

// A hold had late, once the API lets the source in, is sent again, held.
func TestHoldHadLateIsSentHeld(t *testing.T) {
	e := start(t, opts{hooks: []asgtest.Hook{{Name: hookName, HeartbeatTimeout: 5 * time.Second}},
		before: func(e *env) { e.api.Deny("DescribeLifecycleHooks") }})
	nt := e.scaleIn()
	require.False(t, nt.Held)
	e.api.Allow("DescribeLifecycleHooks")
	held := e.next()
	assert.True(t, held.Held, "%v", held)
	assert.Equal(t, asg.Event, held.Event)
	require.NoError(t, e.release(held))
	assert.Len(t, e.calls("CompleteLifecycleAction", true), 1)
}

// An API that does not answer costs each call its RequestTimeout, not the
// notice.
func TestHangingAPIDoesNotHoldTheNotice(t *testing.T) {
	e := start(t, opts{cfg: func(c *asg.Config) { c.RequestTimeout = 100 * time.Millisecond }})
	e.api.Inject(termsigtest.Fault{Hang: true})
	require.NoError(t, e.api.ScaleIn(imdstest.InstanceID))
	begin := time.Now()
	nt := e.next()
	assert.Less(t, time.Since(begin), 2*time.Second)
	assert.False(t, nt.Held)
	assert.Contains(t, nt.Reason, "not held")
	e.api.ClearFaults()
}

// Without credentials (no instance profile), the scale-in is still a
// notice, and Status says why nothing is held.
func TestNoCredentialsStillNotices(t *testing.T) {
	e := start(t, opts{before: func(e *env) { e.imds.SetRole("") }})
	nt := e.scaleIn()
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.False(t, nt.Held)
	waitStatus(t, e, "credentials")
}

// Release after Stop still completes the hooks: the consumer may stop its
// Notifier before it hands the instance back.
func TestReleaseAfterStopCompletes(t *testing.T) {
	e := start(t, opts{})
	nt := e.scaleIn()
	require.True(t, nt.Held)
	e.n.Stop()
	require.NoError(t, e.release(nt))
	assert.Len(t, e.calls("CompleteLifecycleAction", true), 1)
}

// Stop without Release completes nothing: the hook's DefaultResult
// applies at its timeout.
func TestStopWithoutReleaseCompletesNothing(t *testing.T) {
	e := start(t, opts{})
	require.True(t, e.scaleIn().Held)
	e.n.Stop()
	assert.Empty(t, e.calls("CompleteLifecycleAction", true))
	assert.Equal(t, "Terminating:Wait", e.api.State(imdstest.InstanceID))
}

// Release of a notice of another Event, or before any scale-in, holds
// nothing and asks the API nothing.
func TestReleaseOfNothingHeldDoesNothing(t *testing.T) {
	e := start(t, opts{})
	calls := len(e.api.Calls())
	require.NoError(t, e.release(termsig.Notice{Source: asg.Name, Event: asg.Event}))
	require.NoError(t, e.release(termsig.Notice{Source: asg.Name, Event: "other"}))
	assert.Equal(t, calls, len(e.api.Calls()))
}

// An instance outside any group (IMDS answers 404) costs no API call.
func TestInstanceInNoGroupAsksTheAPINothing(t *testing.T) {
	e := start(t, opts{before: func(e *env) { e.imds.SetLifecycleState("") }})
	e.n.Stop()
	assert.Empty(t, e.api.Calls())
}

// The source keeps the contract of termsig.Source.
func TestSourceKeepsContract(t *testing.T) {
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		e := setUp(t, opts{})
		return asg.New(e.cfg), func() { require.NoError(t, e.api.ScaleIn(imdstest.InstanceID)) }
	})
}

// Available is false away from EC2, and a Config that cannot work is an
// error that is not ErrUnavailable.
func TestAvailable(t *testing.T) {
	root := t.TempDir()
	err := asg.New(asg.Config{IMDS: imds.Config{Root: root}}).Available()
	assert.ErrorIs(t, err, termsig.ErrUnavailable)
	for _, cfg := range []asg.Config{
		{Endpoint: "not a url"},
		{RequestTimeout: -1},
		{MaxHold: -time.Second},
		{InstanceID: "i-xyz"},
	} {
		err := asg.New(cfg).Available()
		require.Error(t, err)
		assert.NotErrorIs(t, err, termsig.ErrUnavailable)
		assert.True(t, strings.HasPrefix(err.Error(), "asg: "), err.Error())
	}
}

func waitStatus(t *testing.T, e *env, want string) {
	t.Helper()
	e.log.WaitUntil(t, "Status saying "+want, func(recs []slog.Record) bool {
		for _, r := range recs {
			if r.Message == "termsig: source error, retrying" && strings.Contains(testlog.Attr(r, "err"), want) {
				return true
			}
		}
		return false
	})
}

// assertNoMoreNotices checks that nothing more comes until Stop.
func assertNoMoreNotices(t *testing.T, e *env) {
	t.Helper()
	e.n.Stop()
	for nt := range e.n.C() {
		t.Errorf("a notice after the last: %v", nt)
	}
}

package asg_test

import (
	"context"
	"runtime"
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
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/termsigtest"
)

// noTimeoutWithin fails if a lifecycle action times out within d.
func noTimeoutWithin(t *testing.T, e *env, d time.Duration, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if e.api.AwaitCalls(ctx, asgtest.ActionTimeout, 1) == nil {
		t.Errorf("%s: the lifecycle action timed out (state %s, %d heartbeats)", why,
			e.api.State(imdstest.InstanceID), len(e.calls("RecordLifecycleActionHeartbeat", true)))
	}
}

// A consumer that does not read C while it drains (a loop that drains
// before it reads again) keeps the hold: heartbeats do not wait for it.
func TestConsumerThatDoesNotReadKeepsTheHold(t *testing.T) {
	e := start(t, opts{hooks: []asgtest.Hook{{Name: hookName, HeartbeatTimeout: time.Second, DefaultResult: "ABANDON"}},
		notifier: termsig.Config{Buffer: 1}})
	nt := e.scaleIn()
	require.True(t, nt.Held)
	noTimeoutWithin(t, e, 4*time.Second, "a consumer that does not read C")
	// Once it reads again, what it gets is where the hold stands: at most
	// the one in C's buffer and the one being put there are stale.
	for i := range 3 {
		nt = e.next()
		require.True(t, nt.Held)
		if nt.Deadline.After(time.Now()) {
			return
		}
		t.Logf("stale notice %d: %v", i+1, nt)
	}
	t.Errorf("three notices later, still none whose Deadline is ahead: they queued up instead of being replaced")
}

// Another party completing its own hook (a Lambda done with its work)
// is no lapse: the source keeps the hook that still holds the instance.
func TestAnotherPartyCompletingItsHookIsNotALapse(t *testing.T) {
	e := start(t, opts{hooks: []asgtest.Hook{
		{Name: hookName, HeartbeatTimeout: 2 * time.Second, DefaultResult: "CONTINUE"},
		{Name: "lambda", HeartbeatTimeout: 2 * time.Second, DefaultResult: "CONTINUE"},
	}})
	nt := e.scaleIn()
	require.True(t, nt.Held)
	_, err := e.sdk().CompleteLifecycleAction(context.Background(), &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String("lambda"),
		InstanceId: aws.String(imdstest.InstanceID), LifecycleActionResult: aws.String("CONTINUE")})
	require.NoError(t, err)
	noTimeoutWithin(t, e, 3*time.Second, "the other hook completed")
	assert.Equal(t, asgtest.StateWait, e.api.State(imdstest.InstanceID))
	assert.Zero(t, e.log.Count("asg: the hold lapsed before Release; the instance goes on"))
	require.NoError(t, e.release(nt))
	e.n.Stop()
	for got := range e.n.C() {
		assert.True(t, got.Held, "a notice that is not held: %v", got)
	}
}

// Config.Hooks leaves the hooks of other parties alone: neither
// heartbeats nor completions.
func TestHooksOfOthersAreLeftAlone(t *testing.T) {
	e := start(t, opts{hooks: []asgtest.Hook{
		{Name: hookName, HeartbeatTimeout: time.Second},
		{Name: "lambda", HeartbeatTimeout: 30 * time.Second},
	}, cfg: func(c *asg.Config) { c.Hooks = []string{hookName} }})
	nt := e.scaleIn()
	require.True(t, nt.Held)
	e.awaitCalls("RecordLifecycleActionHeartbeat", 3)
	require.NoError(t, e.release(nt))
	e.n.Stop()
	for _, c := range e.api.Calls() {
		assert.NotEqual(t, "lambda", c.Hook, "%s on another party's hook", c.Action)
	}
}

// Heartbeats go to all hooks at once: with 20 hooks whose heartbeats
// hang, the notice comes after one RequestTimeout, not twenty.
func TestHangingHeartbeatsOfManyHooksCostOneTimeout(t *testing.T) {
	hooks := make([]asgtest.Hook, 20)
	for i := range hooks {
		hooks[i] = asgtest.Hook{Name: "hook-" + string(rune('a'+i)), HeartbeatTimeout: 30 * time.Second}
	}
	e := start(t, opts{hooks: hooks, cfg: func(c *asg.Config) { c.RequestTimeout = 250 * time.Millisecond }})
	e.api.Inject(termsigtest.Fault{Key: "RecordLifecycleActionHeartbeat", Hang: true})
	t.Cleanup(e.api.ClearFaults)
	begin := time.Now()
	require.NoError(t, e.api.ScaleIn(imdstest.InstanceID))
	nt := e.next()
	assert.Less(t, time.Since(begin), 1500*time.Millisecond)
	assert.False(t, nt.Held)
}

// Release of a scale-in whose hold was not had retries a throttled API
// within its context, and completes the hook.
func TestReleaseOfAScaleInNotYetHeldRetries(t *testing.T) {
	e := start(t, opts{hooks: []asgtest.Hook{{Name: hookName, HeartbeatTimeout: 5 * time.Second}},
		before: func(e *env) { e.api.Deny("DescribeLifecycleHooks") }})
	nt := e.scaleIn()
	require.False(t, nt.Held)
	e.api.Inject(asgtest.ErrorFault("DescribeLifecycleHooks", "Throttling", 5))
	e.api.Allow("DescribeLifecycleHooks")
	require.NoError(t, e.release(nt))
	assert.Len(t, e.calls("CompleteLifecycleAction", true), 1)
}

// A hook whose HeartbeatTimeout is not one Auto Scaling allows still
// holds the instance: the notice says so, and Release completes it.
func TestHookWithAnOddTimeoutIsCompletedOnRelease(t *testing.T) {
	e := start(t, opts{hooks: []asgtest.Hook{{Name: hookName, HeartbeatTimeout: 7201 * time.Second}}})
	nt := e.scaleIn()
	assert.False(t, nt.Held)
	assert.Contains(t, nt.Reason, "its end is unknown")
	require.NoError(t, e.release(nt))
	assert.Len(t, e.calls("CompleteLifecycleAction", true), 1)
	assert.Equal(t, asgtest.StateTerminated, e.api.State(imdstest.InstanceID))
}

// The hooks of the first look hold the instance when the API throttles
// their description at the scale-in.
func TestHooksOfTheFirstLookHoldWhenTheAPIIsThrottled(t *testing.T) {
	e := start(t, opts{hooks: []asgtest.Hook{{Name: hookName, HeartbeatTimeout: 2 * time.Second}}})
	e.awaitCalls("DescribeLifecycleHooks", 1) // the first look
	e.api.Inject(asgtest.ErrorFault("DescribeLifecycleHooks", "Throttling", 0))
	t.Cleanup(e.api.ClearFaults)
	nt := e.scaleIn()
	assert.True(t, nt.Held, "%v", nt)
	noTimeoutWithin(t, e, 3*time.Second, "the hooks' description throttled")
}

// Without a first look, the hold is sought again within the hold: after
// a burst of throttling the hook is held before it times out.
func TestHoldIsSoughtAgainWithinTheHold(t *testing.T) {
	e := start(t, opts{hooks: []asgtest.Hook{{Name: hookName, HeartbeatTimeout: 2 * time.Second}},
		before: func(e *env) { e.api.Deny("DescribeLifecycleHooks") }})
	e.api.Inject(asgtest.ErrorFault("DescribeLifecycleHooks", "Throttling", 5))
	e.api.Allow("DescribeLifecycleHooks")
	nt := e.scaleIn()
	for !nt.Held {
		nt = e.next()
	}
	assert.Empty(t, e.calls(asgtest.ActionTimeout, true), "the hook timed out before the source asked again")
	require.NoError(t, e.release(nt))
}

// Release returns once its context is done, also while the clients are
// being made (the region asked of an IMDS that hangs).
func TestReleaseReturnsWithItsContextWhileTheClientsAreMade(t *testing.T) {
	e := setUp(t, opts{cfg: func(c *asg.Config) { c.RequestTimeout = 3 * time.Second }})
	e.imds.Inject(termsigtest.Fault{Key: "/latest/" + imdstest.PathIdentityDocument, Hang: true})
	t.Cleanup(e.imds.ClearFaults)
	e.src = asg.New(e.cfg)
	e.n = termsig.Config{Logger: e.log.Logger()}.New(e.src)
	t.Cleanup(e.n.Stop)
	<-e.n.Ready()
	require.NoError(t, e.imds.AwaitRequests(context.Background(), "/latest/"+imdstest.PathIdentityDocument, 0))
	for e.imds.InFlight() == 0 {
		<-e.imds.Served()
	}
	require.NoError(t, e.api.ScaleIn(imdstest.InstanceID))
	nt := e.next() // from IMDS alone
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_ = e.n.Release(ctx, nt)
	assert.Less(t, time.Since(begin), 500*time.Millisecond)
}

// MaxHold shorter than a hook's timeout: no heartbeat is sent, and the
// Deadline and HoldLimit are the hook's own end.
func TestMaxHoldShorterThanAHeartbeatTimeoutGivesTheHooksOwnEnd(t *testing.T) {
	e := start(t, opts{hooks: []asgtest.Hook{{Name: hookName, HeartbeatTimeout: 3 * time.Second, DefaultResult: "CONTINUE"}},
		cfg: func(c *asg.Config) { c.MaxHold = 500 * time.Millisecond }})
	nt := e.scaleIn()
	require.True(t, nt.Held)
	acts := e.api.Actions(imdstest.InstanceID)
	require.Len(t, acts, 1)
	assert.WithinDuration(t, acts[0].HeartbeatDeadline, nt.Deadline, 200*time.Millisecond)
	assert.Equal(t, nt.Deadline, nt.HoldLimit)
	assert.Empty(t, e.calls("RecordLifecycleActionHeartbeat", true))
}

// Release after Stop leaves no connection of the API's client open.
func TestReleaseAfterStopLeavesNoConnection(t *testing.T) {
	e := start(t, opts{})
	nt := e.scaleIn()
	require.True(t, nt.Held)
	e.n.Stop()
	require.NoError(t, e.release(nt))
	deadline := time.Now().Add(wait)
	for persistConns() > 0 {
		require.True(t, time.Now().Before(deadline), "a connection of the client is still open after Release")
		runtime.Gosched()
	}
}

// persistConns counts the goroutines of net/http client connections.
func persistConns() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "net/http.(*persistConn).readLoop")
}

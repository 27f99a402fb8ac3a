package asgtest_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/asg/asgtest"
)

func heartbeat(t testing.TB, c *autoscaling.Client, hook, id, token string) error {
	t.Helper()
	in := &autoscaling.RecordLifecycleActionHeartbeatInput{AutoScalingGroupName: aws.String("web"), LifecycleHookName: aws.String(hook)}
	if id != "" {
		in.InstanceId = aws.String(id)
	}
	if token != "" {
		in.LifecycleActionToken = aws.String(token)
	}
	_, err := c.RecordLifecycleActionHeartbeat(ctx(t), in)
	return err
}

func complete(t testing.TB, c *autoscaling.Client, hook, id, token, result string) error {
	t.Helper()
	in := &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: aws.String("web"), LifecycleHookName: aws.String(hook),
		LifecycleActionResult: aws.String(result)}
	if id != "" {
		in.InstanceId = aws.String(id)
	}
	if token != "" {
		in.LifecycleActionToken = aws.String(token)
	}
	_, err := c.CompleteLifecycleAction(ctx(t), in)
	return err
}

// noAction checks that err is AWS's answer to a heartbeat or completion
// without an active lifecycle action.
func noAction(t testing.TB, err error, msg string) {
	t.Helper()
	ae, status, _ := apiError(t, err)
	assert.Equal(t, "ValidationError", ae.ErrorCode())
	assert.Equal(t, msg, ae.ErrorMessage())
	assert.Equal(t, http.StatusBadRequest, status)
}

// targets records the target lifecycle states that OnTargetState gives.
type targets struct {
	mu  sync.Mutex
	got []string
}

func (r *targets) record(id, state string) {
	r.mu.Lock()
	r.got = append(r.got, id+" "+state)
	r.mu.Unlock()
}

func TestScaleInWithoutHooksTerminatesAtOnce(t *testing.T) {
	srv := asgtest.NewServer()
	defer srv.Close()
	var tg targets
	srv.OnTargetState = tg.record
	srv.AddGroup("web")
	srv.AddInstance(iid, "web")
	assert.Equal(t, "InService", srv.State(iid))
	require.NoError(t, srv.ScaleIn(iid))
	assert.Equal(t, "Terminated", srv.State(iid))
	assert.Empty(t, srv.Actions(iid))
	assert.Equal(t, []string{iid + " InService", iid + " Terminated"}, tg.got)
}

func TestScaleInStartsOneActionPerTerminationHook(t *testing.T) {
	srv := asgtest.NewServer()
	defer srv.Close()
	var tg targets
	srv.OnTargetState = tg.record
	srv.AddGroup("web",
		asgtest.Hook{Name: "drain", HeartbeatTimeout: 30 * time.Second},
		asgtest.Hook{Name: "launch", Transition: "autoscaling:EC2_INSTANCE_LAUNCHING"},
		asgtest.Hook{Name: "logs", HeartbeatTimeout: 2 * time.Hour, GlobalTimeout: 3 * time.Hour})
	srv.AddInstance(iid, "web")
	before := time.Now()
	require.NoError(t, srv.ScaleIn(iid))
	assert.Equal(t, "Terminating:Wait", srv.State(iid))
	assert.Equal(t, []string{iid + " InService", iid + " Terminated"}, tg.got, "the target state is Terminated once the scale-in picked it")

	acts := srv.Actions(iid)
	require.Len(t, acts, 2)
	assert.Equal(t, "drain", acts[0].Hook)
	assert.Equal(t, "logs", acts[1].Hook)
	assert.Regexp(t, uuidRE, acts[0].Token)
	assert.NotEqual(t, acts[0].Token, acts[1].Token)
	assert.WithinRange(t, acts[0].Start, before, time.Now())
	assert.Equal(t, acts[0].Start.Add(30*time.Second), acts[0].HeartbeatDeadline)
	assert.Equal(t, acts[0].Start.Add(3000*time.Second), acts[0].GlobalDeadline)
	assert.Equal(t, acts[1].Start.Add(2*time.Hour), acts[1].HeartbeatDeadline)
	assert.Equal(t, acts[1].Start.Add(3*time.Hour), acts[1].GlobalDeadline)
}

func TestScaleInRefusesWhatAScaleInCannotPick(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	assert.ErrorContains(t, srv.ScaleIn("i-0000000000000000f"), "no instance i-0000000000000000f")
	require.NoError(t, srv.ScaleIn(iid))
	assert.ErrorContains(t, srv.ScaleIn(iid), "is Terminating:Wait, not InService")
	srv.Close()
	srv.AddInstance("i-00000000000000001", "web")
	assert.ErrorContains(t, srv.ScaleIn("i-00000000000000001"), "server closed")
}

func TestMisuseOfTheGoAPIPanics(t *testing.T) {
	srv := newServer(t)
	for name, f := range map[string]func(){
		"unnamed hook":       func() { srv.AddGroup("g", asgtest.Hook{}) },
		"fraction of second": func() { srv.AddGroup("g", asgtest.Hook{Name: "h", HeartbeatTimeout: 1500 * time.Millisecond}) },
		"negative":           func() { srv.AddGroup("g", asgtest.Hook{Name: "h", GlobalTimeout: -time.Second}) },
		"bad result":         func() { srv.AddGroup("g", asgtest.Hook{Name: "h", DefaultResult: "RETRY"}) },
		"unknown group":      func() { srv.AddInstance("i-00000000000000001", "db") },
		"instance twice":     func() { srv.AddInstance(iid, "web") },
	} {
		msg, _ := panicValue(f).(string)
		assert.True(t, strings.HasPrefix(msg, "termsig: asgtest: "), "%s: panics with %q", name, msg)
	}
}

func panicValue(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

func TestHeartbeatRestartsTheHeartbeatTimeout(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain", HeartbeatTimeout: 30 * time.Second})
	require.NoError(t, srv.ScaleIn(iid))
	c := client(t, srv)
	first := srv.Actions(iid)[0]

	for _, by := range []struct{ id, token string }{{iid, ""}, {"", first.Token}, {iid, first.Token}} {
		before := time.Now()
		require.NoError(t, heartbeat(t, c, "drain", by.id, by.token))
		a := srv.Actions(iid)[0]
		assert.WithinRange(t, a.HeartbeatDeadline, before.Add(30*time.Second), time.Now().Add(30*time.Second))
		assert.Equal(t, first.GlobalDeadline, a.GlobalDeadline)
		assert.Equal(t, first.Start, a.Start)
	}
	require.NoError(t, srv.AwaitCalls(ctx(t), "RecordLifecycleActionHeartbeat", 3))
	assert.Equal(t, "Terminating:Wait", srv.State(iid))
}

func TestHeartbeatNeverExtendsPastTheGlobalTimeout(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain", HeartbeatTimeout: 60 * time.Second, GlobalTimeout: 60 * time.Second})
	require.NoError(t, srv.ScaleIn(iid))
	require.NoError(t, heartbeat(t, client(t, srv), "drain", iid, ""))
	a := srv.Actions(iid)[0]
	assert.Equal(t, a.GlobalDeadline, a.HeartbeatDeadline)
}

func TestNoActiveLifecycleActionIsValidationError(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	srv.AddInstance("i-00000000000000001", "web")
	require.NoError(t, srv.ScaleIn("i-00000000000000001"))
	c := client(t, srv)
	const msg = "No active Lifecycle Action found with instance ID " + iid
	noAction(t, heartbeat(t, c, "drain", iid, ""), msg) // InService: no action
	noAction(t, complete(t, c, "drain", iid, "", "CONTINUE"), msg)
	noAction(t, heartbeat(t, c, "other", "i-00000000000000001", ""), "No active Lifecycle Action found with instance ID i-00000000000000001")
	noAction(t, heartbeat(t, c, "drain", "", "6f3c3ae5-9f55-4d5c-9b3e-4a2d3e0b7c11"), "No active Lifecycle Action found with token 6f3c3ae5-9f55-4d5c-9b3e-4a2d3e0b7c11")
	assert.Equal(t, []string{"RecordLifecycleActionHeartbeat ValidationError", "CompleteLifecycleAction ValidationError",
		"RecordLifecycleActionHeartbeat ValidationError", "RecordLifecycleActionHeartbeat ValidationError"}, calls(srv))
}

func TestCompleteContinueEndsOnlyItsHook(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"}, asgtest.Hook{Name: "logs"})
	require.NoError(t, srv.ScaleIn(iid))
	c := client(t, srv)
	require.NoError(t, complete(t, c, "drain", iid, "", "CONTINUE"))
	assert.Equal(t, "Terminating:Wait", srv.State(iid))
	acts := srv.Actions(iid)
	require.Len(t, acts, 1)
	assert.Equal(t, "logs", acts[0].Hook)
	noAction(t, complete(t, c, "drain", iid, "", "CONTINUE"), "No active Lifecycle Action found with instance ID "+iid)
	noAction(t, heartbeat(t, c, "drain", iid, ""), "No active Lifecycle Action found with instance ID "+iid)

	require.NoError(t, complete(t, c, "logs", "", acts[0].Token, "CONTINUE"))
	require.NoError(t, srv.AwaitCalls(ctx(t), "CompleteLifecycleAction", 2))
	assert.Equal(t, "Terminated", srv.State(iid))
	assert.Empty(t, srv.Actions(iid))
	noAction(t, complete(t, c, "logs", "", acts[0].Token, "CONTINUE"), "No active Lifecycle Action found with token "+acts[0].Token)
}

// Auto Scaling: "If the instance is terminating, both abandon and
// continue allow the instance to terminate. However, abandon stops any
// remaining actions, such as other lifecycle hooks".
func TestCompleteAbandonEndsEveryHook(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"}, asgtest.Hook{Name: "logs"})
	require.NoError(t, srv.ScaleIn(iid))
	c := client(t, srv)
	require.NoError(t, complete(t, c, "logs", iid, "", "ABANDON"))
	assert.Equal(t, "Terminated", srv.State(iid))
	assert.Empty(t, srv.Actions(iid))
	noAction(t, heartbeat(t, c, "drain", iid, ""), "No active Lifecycle Action found with instance ID "+iid)
}

func TestProceedForHoldsTerminatingProceed(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	srv.SetProceedFor(100 * time.Millisecond)
	require.NoError(t, srv.ScaleIn(iid))
	c := client(t, srv)
	require.NoError(t, complete(t, c, "drain", iid, "", "CONTINUE"))
	assert.Equal(t, "Terminating:Proceed", srv.State(iid))
	out, err := c.DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{iid}})
	require.NoError(t, err)
	require.Len(t, out.AutoScalingInstances, 1)
	assert.Equal(t, "Terminating:Proceed", aws.ToString(out.AutoScalingInstances[0].LifecycleState))

	require.NoError(t, srv.AwaitState(ctx(t), iid, "Terminated"))
	out, err = c.DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{iid}})
	require.NoError(t, err)
	assert.Empty(t, out.AutoScalingInstances)
}

// A lifecycle action that nobody heartbeats times out after its
// HeartbeatTimeout, and its hook's DefaultResult applies: for a
// termination, both let the instance go.
func TestHeartbeatTimeoutAppliesTheDefaultResult(t *testing.T) {
	for _, result := range []string{"CONTINUE", "ABANDON"} {
		t.Run(result, func(t *testing.T) {
			srv := newServer(t, asgtest.Hook{Name: "drain", HeartbeatTimeout: time.Second, DefaultResult: result})
			require.NoError(t, srv.ScaleIn(iid))
			a := srv.Actions(iid)[0]
			require.NoError(t, srv.AwaitCalls(ctx(t), asgtest.ActionTimeout, 1))
			assert.Equal(t, "Terminated", srv.State(iid))
			got := srv.Calls()
			require.Len(t, got, 1)
			assert.Equal(t, asgtest.Call{Action: "Timeout", Group: "web", Hook: "drain", InstanceID: iid, Token: a.Token, Result: result, At: got[0].At}, got[0])
			assert.False(t, got[0].At.Before(a.HeartbeatDeadline), "timed out at %v, before its deadline %v", got[0].At, a.HeartbeatDeadline)
			noAction(t, heartbeat(t, client(t, srv), "drain", iid, ""), "No active Lifecycle Action found with instance ID "+iid)
		})
	}
}

func TestTimeoutWithContinueLeavesTheOtherHooksWaiting(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain", HeartbeatTimeout: time.Second, DefaultResult: "CONTINUE"}, asgtest.Hook{Name: "logs"})
	require.NoError(t, srv.ScaleIn(iid))
	require.NoError(t, srv.AwaitCalls(ctx(t), asgtest.ActionTimeout, 1))
	assert.Equal(t, "Terminating:Wait", srv.State(iid))
	acts := srv.Actions(iid)
	require.Len(t, acts, 1)
	assert.Equal(t, "logs", acts[0].Hook)
	require.NoError(t, complete(t, client(t, srv), "logs", iid, "", "CONTINUE"))
	assert.Equal(t, "Terminated", srv.State(iid))
}

func TestTimeoutWithAbandonEndsTheOtherHooks(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain", HeartbeatTimeout: time.Second}, asgtest.Hook{Name: "logs"})
	require.NoError(t, srv.ScaleIn(iid))
	require.NoError(t, srv.AwaitCalls(ctx(t), asgtest.ActionTimeout, 1))
	assert.Equal(t, "Terminated", srv.State(iid))
	assert.Empty(t, srv.Actions(iid))
	assert.Equal(t, []string{"Timeout"}, calls(srv), "the ended hooks do not time out")
}

// Heartbeats keep an action going until its GlobalTimeout, then it times
// out whatever is sent.
func TestGlobalTimeoutEndsTheWaitDespiteHeartbeats(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain", HeartbeatTimeout: time.Second, GlobalTimeout: 2 * time.Second})
	require.NoError(t, srv.ScaleIn(iid))
	a := srv.Actions(iid)[0]
	c := client(t, srv)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	timedOut := make(chan error, 1)
	wctx := ctx(t)
	go func() { timedOut <- srv.AwaitCalls(wctx, asgtest.ActionTimeout, 1) }()
	beats := 0
wait:
	for {
		select {
		case err := <-timedOut:
			require.NoError(t, err)
			break wait
		case <-tick.C:
			if err := heartbeat(t, c, "drain", iid, ""); err == nil {
				beats++
			}
		}
	}
	var timeout asgtest.Call
	for _, c := range srv.Calls() {
		if c.Action == asgtest.ActionTimeout {
			timeout = c
		}
	}
	assert.False(t, timeout.At.Before(a.GlobalDeadline), "timed out at %v, before the global deadline %v", timeout.At, a.GlobalDeadline)
	assert.Greater(t, beats, 5, "heartbeats past the first heartbeat timeout were taken")
	assert.Equal(t, "Terminated", srv.State(iid))
}

func TestCloseStopsTheTimersAndReleasesTheWaiters(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	srv := asgtest.NewServer()
	srv.AddGroup("web", asgtest.Hook{Name: "drain", HeartbeatTimeout: time.Second})
	srv.SetProceedFor(time.Hour)
	srv.AddInstance(iid, "web")
	srv.AddInstance("i-00000000000000001", "web")
	require.NoError(t, srv.ScaleIn(iid))
	require.NoError(t, srv.ScaleIn("i-00000000000000001"))
	require.NoError(t, complete(t, client(t, srv), "drain", "i-00000000000000001", "", "CONTINUE")) // Terminating:Proceed for an hour
	waited := make(chan error, 2)
	wctx := ctx(t)
	go func() { waited <- srv.AwaitCalls(wctx, asgtest.ActionTimeout, 1) }()
	go func() { waited <- srv.AwaitState(wctx, iid, "InService") }()

	srv.Close()
	for range 2 {
		select {
		case err := <-waited:
			assert.ErrorContains(t, err, "server closed")
		case <-time.After(wait):
			t.Fatal("a waiter was not released by Close")
		}
	}
	srv.Close() // again: nothing
	goleak.VerifyNone(t, ignore)
	assert.Equal(t, "Terminating:Wait", srv.State(iid), "no timeout after Close")
}

func TestConcurrentCallsAndTimeoutsAreSafe(t *testing.T) {
	srv := asgtest.NewServer()
	defer srv.Close()
	srv.AddGroup("web", asgtest.Hook{Name: "drain", HeartbeatTimeout: time.Second}, asgtest.Hook{Name: "logs", HeartbeatTimeout: time.Second, DefaultResult: "CONTINUE"})
	ids := []string{"i-00000000000000001", "i-00000000000000002", "i-00000000000000003", "i-00000000000000004"}
	for _, id := range ids {
		srv.AddInstance(id, "web")
	}
	c := client(t, srv)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			assert.NoError(t, srv.ScaleIn(id))
			for range 5 {
				_ = heartbeat(t, c, "drain", id, "")
				_, _ = c.DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{})
				_ = srv.Actions(id)
			}
			if i%2 == 0 {
				_ = complete(t, c, "drain", id, "", "ABANDON")
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		require.NoError(t, srv.AwaitState(ctx(t), id, "Terminated"))
	}
}

func TestAddGroupAgainReplacesTheHooksButNotTheActions(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	require.NoError(t, srv.ScaleIn(iid))
	srv.AddGroup("web", asgtest.Hook{Name: "logs"})
	out, err := client(t, srv).DescribeLifecycleHooks(ctx(t), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("web")})
	require.NoError(t, err)
	require.Len(t, out.LifecycleHooks, 1)
	assert.Equal(t, "logs", aws.ToString(out.LifecycleHooks[0].LifecycleHookName))
	require.Len(t, srv.Actions(iid), 1)
	assert.Equal(t, "drain", srv.Actions(iid)[0].Hook)
	require.NoError(t, complete(t, client(t, srv), "drain", iid, "", "CONTINUE"))
	require.NoError(t, srv.AwaitRequests(ctx(t), "CompleteLifecycleAction", 1))
	assert.Equal(t, "Terminated", srv.State(iid))
}

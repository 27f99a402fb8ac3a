package asgtest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/asg/asgtest"
	"github.com/termsig/termsig/termsigtest"
)

func TestErrorFaultAnswersWithTheAWSError(t *testing.T) {
	for _, tc := range []struct {
		code, msg string
		status    int
	}{
		{"Throttling", "Rate exceeded", http.StatusBadRequest},
		{"ResourceContention", "You already have a pending update to an Auto Scaling resource (for example, a group, instance, or load balancer).", http.StatusInternalServerError},
		{"ServiceUnavailable", "Service is unavailable. Please try again later.", http.StatusServiceUnavailable},
		{"RequestExpired", "RequestExpired", http.StatusBadRequest},
	} {
		t.Run(tc.code, func(t *testing.T) {
			srv := newServer(t, asgtest.Hook{Name: "drain"})
			require.NoError(t, srv.ScaleIn(iid))
			srv.Inject(asgtest.ErrorFault("RecordLifecycleActionHeartbeat", tc.code, 1))
			c := client(t, srv)
			ae, status, id := apiError(t, heartbeat(t, c, "drain", iid, ""))
			assert.Equal(t, tc.code, ae.ErrorCode())
			assert.Equal(t, tc.msg, ae.ErrorMessage())
			assert.Equal(t, tc.status, status)
			assert.Regexp(t, uuidRE, id)
			require.NoError(t, heartbeat(t, c, "drain", iid, ""), "count 1: the next one is served")
			assert.Equal(t, 2, srv.Requests("RecordLifecycleActionHeartbeat"))
			assert.Equal(t, []string{"RecordLifecycleActionHeartbeat"}, calls(srv), "the faulted request is not logged")
		})
	}
}

func TestErrorFaultAccessDeniedNamesTheAction(t *testing.T) {
	srv := newServer(t)
	srv.Inject(asgtest.ErrorFault("DescribeAutoScalingInstances", "AccessDenied", 0))
	c := client(t, srv)
	for range 2 {
		_, err := c.DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{})
		ae, status, _ := apiError(t, err)
		assert.Equal(t, "AccessDenied", ae.ErrorCode())
		assert.Contains(t, ae.ErrorMessage(), "is not authorized to perform: autoscaling:DescribeAutoScalingInstances")
		assert.Equal(t, http.StatusForbidden, status)
	}
	srv.ClearFaults()
	_, err := c.DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{})
	require.NoError(t, err)
}

// The SDK's standard retryer takes Throttling for what it is and tries
// again, and the fake serves the attempt after the burst.
func TestSDKRetriesThroughAThrottlingBurst(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	require.NoError(t, srv.ScaleIn(iid))
	srv.Inject(asgtest.ErrorFault("CompleteLifecycleAction", "Throttling", 2))
	c := client(t, srv, func(o *autoscaling.Options) {
		o.RetryMaxAttempts = 0 // the Retryer's
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 3
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	})
	require.NoError(t, complete(t, c, "drain", iid, "", "CONTINUE"))
	assert.Equal(t, 3, srv.Requests("CompleteLifecycleAction"))
	assert.Equal(t, "Terminated", srv.State(iid))
}

func TestFaultsAreKeyedByAction(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	require.NoError(t, srv.ScaleIn(iid))
	srv.Inject(asgtest.ErrorFault("CompleteLifecycleAction", "Throttling", 0))
	c := client(t, srv)
	require.NoError(t, heartbeat(t, c, "drain", iid, ""))
	_, err := c.DescribeLifecycleHooks(ctx(t), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("web")})
	require.NoError(t, err)
	ae, _, _ := apiError(t, complete(t, c, "drain", iid, "", "CONTINUE"))
	assert.Equal(t, "Throttling", ae.ErrorCode())

	srv.Inject(termsigtest.Fault{Count: 1, Status: http.StatusServiceUnavailable}) // every action: a front end's text
	_, err = c.DescribeLifecycleHooks(ctx(t), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("web")})
	var re *awshttp.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, http.StatusServiceUnavailable, re.HTTPStatusCode())
}

// A fault answers in the API's place, before the request is looked at:
// an unsigned request gets it, not MissingAuthenticationToken.
func TestFaultAppliesBeforeTheSignatureIsChecked(t *testing.T) {
	srv := newServer(t)
	srv.Inject(asgtest.ErrorFault("DescribeAutoScalingInstances", "Throttling", 1))
	r := post(t, srv, "Action=DescribeAutoScalingInstances&Version=2011-01-01", "")
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, "text/xml", r.header.Get("Content-Type"))
	id := r.header.Get("X-Amzn-Requestid")
	assert.Regexp(t, uuidRE, id)
	assert.Equal(t, `<ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type><Code>Throttling</Code>`+
		`<Message>Rate exceeded</Message></Error><RequestId>`+id+`</RequestId></ErrorResponse>`, r.body)
	r = post(t, srv, "Action=DescribeAutoScalingInstances&Version=2011-01-01", "")
	assert.Contains(t, r.body, "<Code>MissingAuthenticationToken</Code>")
}

func TestHangDropAndStopFaultTheConnection(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	require.NoError(t, srv.ScaleIn(iid))
	c := client(t, srv)

	srv.Inject(termsigtest.Fault{Key: "RecordLifecycleActionHeartbeat", Hang: true})
	done := make(chan error, 1)
	go func() { done <- heartbeat(t, c, "drain", iid, "") }()
	await(t, srv, func() bool { return srv.InFlight() == 1 })
	srv.ClearFaults()
	require.NoError(t, <-done, "a hang that is cleared is served")
	require.NoError(t, srv.AwaitCalls(ctx(t), "RecordLifecycleActionHeartbeat", 1))

	srv.Inject(termsigtest.Fault{Key: "CompleteLifecycleAction", Count: 1, Drop: true})
	require.Error(t, complete(t, c, "drain", iid, "", "CONTINUE"))
	assert.Equal(t, "Terminating:Wait", srv.State(iid), "a dropped request does nothing")

	srv.Stop()
	require.Error(t, heartbeat(t, c, "drain", iid, ""))
	require.NoError(t, srv.Start())
	require.NoError(t, complete(t, c, "drain", iid, "", "CONTINUE"))
	assert.Equal(t, "Terminated", srv.State(iid))
}

// await waits until cond holds, looking again whenever a request arrives
// or is answered.
func await(t *testing.T, srv *asgtest.Server, cond func() bool) {
	t.Helper()
	timeout := time.After(wait)
	for {
		served := srv.Served()
		if cond() {
			return
		}
		select {
		case <-served:
		case <-timeout:
			t.Fatal("waited in vain")
		}
	}
}

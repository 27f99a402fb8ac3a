package asgtest_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/asg/asgtest"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestDescribeAutoScalingInstancesAnswersWhatTheSDKReads(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	out, err := client(t, srv).DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{iid}})
	require.NoError(t, err)
	require.Len(t, out.AutoScalingInstances, 1)
	in := out.AutoScalingInstances[0]
	assert.Equal(t, iid, aws.ToString(in.InstanceId))
	assert.Equal(t, "web", aws.ToString(in.AutoScalingGroupName))
	assert.Equal(t, "InService", aws.ToString(in.LifecycleState))
	assert.Equal(t, "HEALTHY", aws.ToString(in.HealthStatus))
	assert.Equal(t, "us-east-1a", aws.ToString(in.AvailabilityZone))
	assert.Equal(t, "t3.micro", aws.ToString(in.InstanceType))
	require.NotNil(t, in.LaunchTemplate)
	assert.Equal(t, "lt-0123456789abcdef0", aws.ToString(in.LaunchTemplate.LaunchTemplateId))
	assert.Equal(t, false, aws.ToBool(in.ProtectedFromScaleIn))
	assert.Nil(t, out.NextToken)
	id, ok := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
	assert.True(t, ok)
	assert.Regexp(t, uuidRE, id)

	require.NoError(t, srv.ScaleIn(iid))
	out, err = client(t, srv).DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{iid}})
	require.NoError(t, err)
	assert.Equal(t, "Terminating:Wait", aws.ToString(out.AutoScalingInstances[0].LifecycleState))
}

// The answer as AWS writes it: the namespace, the Result, the member
// lists, the request id in the body and in x-amzn-RequestId.
func TestAnswersAreAWSXML(t *testing.T) {
	srv := newServer(t)
	r := post(t, srv, "Action=DescribeAutoScalingInstances&Version=2011-01-01&InstanceIds.member.1="+iid, sigv4)
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "text/xml", r.header.Get("Content-Type"))
	id := r.header.Get("X-Amzn-Requestid")
	assert.Regexp(t, uuidRE, id)
	assert.Equal(t, `<DescribeAutoScalingInstancesResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">`+
		`<DescribeAutoScalingInstancesResult><AutoScalingInstances><member>`+
		`<InstanceId>i-0123456789abcdef0</InstanceId><InstanceType>t3.micro</InstanceType><AutoScalingGroupName>web</AutoScalingGroupName>`+
		`<AvailabilityZone>us-east-1a</AvailabilityZone><LifecycleState>InService</LifecycleState><HealthStatus>HEALTHY</HealthStatus>`+
		`<LaunchTemplate><LaunchTemplateId>lt-0123456789abcdef0</LaunchTemplateId><LaunchTemplateName>asgtest</LaunchTemplateName><Version>1</Version></LaunchTemplate>`+
		`<ProtectedFromScaleIn>false</ProtectedFromScaleIn></member></AutoScalingInstances></DescribeAutoScalingInstancesResult>`+
		`<ResponseMetadata><RequestId>`+id+`</RequestId></ResponseMetadata></DescribeAutoScalingInstancesResponse>`, r.body)

	r = post(t, srv, "Action=DescribeAutoScalingInstances&Version=2011-01-01&InstanceIds.member.1=i-0000000000000000f", sigv4)
	assert.Contains(t, r.body, "<DescribeAutoScalingInstancesResult><AutoScalingInstances></AutoScalingInstances></DescribeAutoScalingInstancesResult>")

	r = post(t, srv, "Action=RecordLifecycleActionHeartbeat&Version=2011-01-01&AutoScalingGroupName=web&LifecycleHookName=h&InstanceId="+iid, sigv4)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, `<ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type>`+
		`<Code>ValidationError</Code><Message>No active Lifecycle Action found with instance ID i-0123456789abcdef0</Message></Error>`+
		`<RequestId>`+r.header.Get("X-Amzn-Requestid")+`</RequestId></ErrorResponse>`, r.body)
}

func TestDescribeAutoScalingInstancesLeavesOutUnknownAndTerminatedInstances(t *testing.T) {
	srv := newServer(t)
	srv.AddInstance("i-00000000000000001", "web")
	srv.AddInstance("i-00000000000000002", "web")
	require.NoError(t, srv.ScaleIn("i-00000000000000002")) // no hooks: Terminated at once
	c := client(t, srv)
	for _, tc := range []struct {
		name string
		ids  []string
		want []string
	}{
		{"all", nil, []string{"i-00000000000000001", iid}},
		{"named", []string{iid, "i-0000000000000000f"}, []string{iid}},
		{"terminated", []string{"i-00000000000000002"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: tc.ids})
			require.NoError(t, err)
			var got []string
			for _, in := range out.AutoScalingInstances {
				got = append(got, aws.ToString(in.InstanceId))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDescribeAutoScalingInstancesPagesWithNextToken(t *testing.T) {
	srv := newServer(t)
	srv.AddInstance("i-00000000000000001", "web")
	srv.AddInstance("i-00000000000000002", "web")
	p := autoscaling.NewDescribeAutoScalingInstancesPaginator(client(t, srv), &autoscaling.DescribeAutoScalingInstancesInput{MaxRecords: aws.Int32(2)})
	var got []string
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx(t))
		require.NoError(t, err)
		pages++
		for _, in := range out.AutoScalingInstances {
			got = append(got, aws.ToString(in.InstanceId))
		}
	}
	assert.Equal(t, 2, pages)
	assert.Equal(t, []string{"i-00000000000000001", "i-00000000000000002", iid}, got)

	_, err := client(t, srv).DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{NextToken: aws.String("nonsense")})
	ae, status, _ := apiError(t, err)
	assert.Equal(t, "InvalidNextToken", ae.ErrorCode())
	assert.Equal(t, http.StatusBadRequest, status)
}

func TestDescribeLifecycleHooksFillsInAWSDefaults(t *testing.T) {
	srv := newServer(t,
		asgtest.Hook{Name: "drain"},
		asgtest.Hook{Name: "quick", HeartbeatTimeout: 30 * time.Second, DefaultResult: "CONTINUE"},
		asgtest.Hook{Name: "launch", Transition: "autoscaling:EC2_INSTANCE_LAUNCHING", HeartbeatTimeout: time.Second, GlobalTimeout: 7 * time.Second},
	)
	c := client(t, srv)
	out, err := c.DescribeLifecycleHooks(ctx(t), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("web")})
	require.NoError(t, err)
	type hook struct {
		name, group, transition, result string
		heartbeat, global               int32
	}
	var got []hook
	for _, h := range out.LifecycleHooks {
		got = append(got, hook{aws.ToString(h.LifecycleHookName), aws.ToString(h.AutoScalingGroupName), aws.ToString(h.LifecycleTransition),
			aws.ToString(h.DefaultResult), aws.ToInt32(h.HeartbeatTimeout), aws.ToInt32(h.GlobalTimeout)})
	}
	assert.Equal(t, []hook{
		{"drain", "web", "autoscaling:EC2_INSTANCE_TERMINATING", "ABANDON", 3600, 172800},
		{"quick", "web", "autoscaling:EC2_INSTANCE_TERMINATING", "CONTINUE", 30, 3000},
		{"launch", "web", "autoscaling:EC2_INSTANCE_LAUNCHING", "ABANDON", 1, 7},
	}, got)

	out, err = c.DescribeLifecycleHooks(ctx(t), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("web"), LifecycleHookNames: []string{"quick", "gone"}})
	require.NoError(t, err)
	require.Len(t, out.LifecycleHooks, 1)
	assert.Equal(t, "quick", aws.ToString(out.LifecycleHooks[0].LifecycleHookName))
}

func TestDescribeLifecycleHooksOfUnknownGroupIsValidationError(t *testing.T) {
	srv := newServer(t)
	_, err := client(t, srv).DescribeLifecycleHooks(ctx(t), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("db")})
	ae, status, id := apiError(t, err)
	assert.Equal(t, "ValidationError", ae.ErrorCode())
	assert.Equal(t, "AutoScalingGroup name not found - AutoScalingGroup db not found", ae.ErrorMessage())
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Regexp(t, uuidRE, id)
}

func TestDescribeScalingActivitiesShowsTheTermination(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	srv.AddInstance("i-00000000000000001", "web")
	srv.SetProceedFor(time.Hour)
	c := client(t, srv)
	before := time.Now().Truncate(time.Millisecond)
	require.NoError(t, srv.ScaleIn(iid))

	activity := func() types.Activity {
		t.Helper()
		out, err := c.DescribeScalingActivities(ctx(t), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("web")})
		require.NoError(t, err)
		require.Len(t, out.Activities, 1)
		return out.Activities[0]
	}
	a := activity()
	assert.Regexp(t, uuidRE, aws.ToString(a.ActivityId))
	assert.Equal(t, "web", aws.ToString(a.AutoScalingGroupName))
	assert.Regexp(t, `^arn:aws:autoscaling:eu-west-1:123456789012:autoScalingGroup:[0-9a-f-]{36}:autoScalingGroupName/web$`, aws.ToString(a.AutoScalingGroupARN))
	assert.Equal(t, "Terminating EC2 instance: "+iid, aws.ToString(a.Description))
	assert.Regexp(t, `^At \S+Z an instance was taken out of service in response to a difference between desired and actual capacity, shrinking the capacity from 2 to 1\. At \S+Z instance `+iid+` was selected for termination\.$`, aws.ToString(a.Cause))
	assert.Equal(t, types.ScalingActivityStatusCodeMidLifecycleAction, a.StatusCode)
	assert.Equal(t, int32(50), aws.ToInt32(a.Progress))
	assert.Nil(t, a.EndTime)
	start := aws.ToTime(a.StartTime)
	assert.False(t, start.Before(before), "StartTime %v before %v", start, before)
	assert.WithinDuration(t, time.Now(), start, wait)
	assert.Equal(t, srv.Actions(iid)[0].Start.UTC().Truncate(time.Millisecond), start)
	assert.Contains(t, aws.ToString(a.Details), `"Availability Zone":"us-east-1a"`)

	_, err := c.CompleteLifecycleAction(ctx(t), &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: aws.String("web"),
		LifecycleHookName: aws.String("drain"), InstanceId: aws.String(iid), LifecycleActionResult: aws.String("CONTINUE")})
	require.NoError(t, err)
	a = activity()
	assert.Equal(t, types.ScalingActivityStatusCodeInProgress, a.StatusCode)
	assert.Nil(t, a.EndTime)

	srv.SetProceedFor(0)
	srv.AddGroup("batch")
	srv.AddInstance("i-00000000000000002", "batch")
	require.NoError(t, srv.ScaleIn("i-00000000000000002")) // no hook to wait on: done at once
	out, err := c.DescribeScalingActivities(ctx(t), &autoscaling.DescribeScalingActivitiesInput{})
	require.NoError(t, err)
	require.Len(t, out.Activities, 2)
	newest := out.Activities[0]
	assert.Equal(t, "Terminating EC2 instance: i-00000000000000002", aws.ToString(newest.Description), "newest first")
	assert.Equal(t, "batch", aws.ToString(newest.AutoScalingGroupName))
	assert.Equal(t, types.ScalingActivityStatusCodeSuccessful, newest.StatusCode)
	assert.Equal(t, int32(100), aws.ToInt32(newest.Progress))
	assert.Equal(t, aws.ToTime(newest.StartTime), aws.ToTime(newest.EndTime))

	out, err = c.DescribeScalingActivities(ctx(t), &autoscaling.DescribeScalingActivitiesInput{ActivityIds: []string{aws.ToString(a.ActivityId)}})
	require.NoError(t, err)
	require.Len(t, out.Activities, 1)
	assert.Equal(t, a.ActivityId, out.Activities[0].ActivityId)

	out, err = c.DescribeScalingActivities(ctx(t), &autoscaling.DescribeScalingActivitiesInput{MaxRecords: aws.Int32(1)})
	require.NoError(t, err)
	require.Len(t, out.Activities, 1)
	require.NotNil(t, out.NextToken)
	out, err = c.DescribeScalingActivities(ctx(t), &autoscaling.DescribeScalingActivitiesInput{MaxRecords: aws.Int32(1), NextToken: out.NextToken})
	require.NoError(t, err)
	require.Len(t, out.Activities, 1)
	assert.Equal(t, a.ActivityId, out.Activities[0].ActivityId)
	assert.Nil(t, out.NextToken)
}

func TestUnsignedRequestIsMissingAuthenticationToken(t *testing.T) {
	srv := newServer(t)
	c := client(t, srv, func(o *autoscaling.Options) { o.Credentials = aws.AnonymousCredentials{} })
	_, err := c.DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{})
	ae, status, _ := apiError(t, err)
	assert.Equal(t, "MissingAuthenticationToken", ae.ErrorCode())
	assert.Equal(t, "Request is missing Authentication Token", ae.ErrorMessage())
	assert.Equal(t, http.StatusForbidden, status)

	for _, auth := range []string{"", "Basic dXNlcjpwYXNz"} {
		r := post(t, srv, "Action=DescribeAutoScalingInstances&Version=2011-01-01", auth)
		assert.Equal(t, http.StatusForbidden, r.status)
		assert.Contains(t, r.body, "<Error><Type>Sender</Type><Code>MissingAuthenticationToken</Code><Message>Request is missing Authentication Token</Message></Error>")
	}
	assert.Equal(t, []string{"DescribeAutoScalingInstances MissingAuthenticationToken", "DescribeAutoScalingInstances MissingAuthenticationToken",
		"DescribeAutoScalingInstances MissingAuthenticationToken"}, calls(srv))
}

func TestUnknownActionIsInvalidAction(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct{ form, code, msg string }{
		{"Action=TerminateInstanceInAutoScalingGroup&Version=2011-01-01", "InvalidAction", "Could not find operation TerminateInstanceInAutoScalingGroup for version 2011-01-01"},
		{"Action=DescribeAutoScalingInstances&Version=2010-08-01", "InvalidAction", "Could not find operation DescribeAutoScalingInstances for version 2010-08-01"},
		{"Version=2011-01-01", "MissingAction", "Missing Action"},
	} {
		r := post(t, srv, tc.form, sigv4)
		assert.Equal(t, http.StatusBadRequest, r.status, tc.form)
		assert.Contains(t, r.body, "<Code>"+tc.code+"</Code><Message>"+tc.msg+"</Message>", tc.form)
	}
}

// Parameters the SDK checks before it sends (the required ones) get the
// ValidationError that AWS's input validation gives to other clients.
func TestBadParametersAreValidationErrors(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	for _, tc := range []struct{ form, msg string }{
		{"Action=RecordLifecycleActionHeartbeat&InstanceId=" + iid,
			"2 validation errors detected: Value null at 'lifecycleHookName' failed to satisfy constraint: Member must not be null; " +
				"Value null at 'autoScalingGroupName' failed to satisfy constraint: Member must not be null"},
		{"Action=CompleteLifecycleAction&AutoScalingGroupName=web&LifecycleHookName=drain&InstanceId=" + iid,
			"1 validation error detected: Value null at 'lifecycleActionResult' failed to satisfy constraint: Member must not be null"},
		{"Action=CompleteLifecycleAction&AutoScalingGroupName=web&LifecycleHookName=drain&LifecycleActionResult=DONE&InstanceId=" + iid,
			"1 validation error detected: Value 'DONE' at 'lifecycleActionResult' failed to satisfy constraint: Member must satisfy enum value set: [CONTINUE, ABANDON]"},
		{"Action=RecordLifecycleActionHeartbeat&AutoScalingGroupName=web&LifecycleHookName=drain",
			"Either LifecycleActionToken or InstanceId must be specified"},
		{"Action=DescribeLifecycleHooks",
			"1 validation error detected: Value null at 'autoScalingGroupName' failed to satisfy constraint: Member must not be null"},
		{"Action=DescribeAutoScalingInstances&MaxRecords=51",
			"1 validation error detected: Value '51' at 'maxRecords' failed to satisfy constraint: Member must have value less than or equal to 50"},
		{"Action=DescribeScalingActivities&MaxRecords=0",
			"1 validation error detected: Value '0' at 'maxRecords' failed to satisfy constraint: Member must have value greater than or equal to 1"},
	} {
		r := post(t, srv, tc.form+"&Version=2011-01-01", sigv4)
		assert.Equal(t, http.StatusBadRequest, r.status, tc.form)
		assert.Contains(t, r.body, "<Code>ValidationError</Code><Message>"+tc.msg+"</Message>", tc.form)
	}
	assert.Equal(t, "InService", srv.State(iid), "nothing changed")
}

func TestRequestBodiesAreCapped(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	srv := newServer(t)
	big := "Action=DescribeAutoScalingInstances&Version=2011-01-01&Padding=" + strings.Repeat("x", 100<<10)
	r := post(t, srv, big, sigv4)
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	assert.Contains(t, r.body, "<Code>RequestEntityTooLarge</Code>")

	// A body without end gets an answer, or its connection closed, once
	// the server has read its fill: it never reads the whole.
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, srv.URL+"/", endless{})
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", sigv4)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil { // else the server hung up while the body was being sent
		res.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	}
	assert.Equal(t, 2, srv.Requests(""))

	// net/http lingers on a connection whose body it left unread (500 ms,
	// so that the client reads the answer before a reset): wait it out,
	// so that TestMain's goleak does not take it for a leak of ours.
	tr.CloseIdleConnections()
	srv.Close()
	deadline := time.Now().Add(wait)
	for goleak.Find(ignore) != nil && time.Now().Before(deadline) {
		<-time.After(50 * time.Millisecond)
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	copy(p, bytes.Repeat([]byte("x"), len(p)))
	return len(p), nil
}

func TestDenyAnswersAccessDeniedUntilAllow(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	require.NoError(t, srv.ScaleIn(iid))
	c := client(t, srv)
	complete := func() error {
		_, err := c.CompleteLifecycleAction(ctx(t), &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: aws.String("web"),
			LifecycleHookName: aws.String("drain"), InstanceId: aws.String(iid), LifecycleActionResult: aws.String("CONTINUE")})
		return err
	}
	srv.Deny("CompleteLifecycleAction")
	srv.Deny("DescribeLifecycleHooks")
	ae, status, _ := apiError(t, complete())
	assert.Equal(t, "AccessDenied", ae.ErrorCode())
	assert.Equal(t, http.StatusForbidden, status)
	assert.Regexp(t, `^User: arn:aws:sts::123456789012:assumed-role/\S+ is not authorized to perform: autoscaling:CompleteLifecycleAction `+
		`on resource: arn:aws:autoscaling:eu-west-1:123456789012:autoScalingGroup:[0-9a-f-]{36}:autoScalingGroupName/web `+
		`because no identity-based policy allows the autoscaling:CompleteLifecycleAction action$`, ae.ErrorMessage())

	_, err := c.DescribeLifecycleHooks(ctx(t), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("web")})
	ae, _, _ = apiError(t, err)
	assert.Regexp(t, `^User: \S+ is not authorized to perform: autoscaling:DescribeLifecycleHooks because no identity-based policy allows the autoscaling:DescribeLifecycleHooks action$`, ae.ErrorMessage())
	assert.Equal(t, "Terminating:Wait", srv.State(iid))

	srv.Allow("CompleteLifecycleAction")
	require.NoError(t, complete())
	assert.Equal(t, "Terminated", srv.State(iid))
	assert.Equal(t, []string{"CompleteLifecycleAction AccessDenied", "DescribeLifecycleHooks AccessDenied", "CompleteLifecycleAction"}, calls(srv))
}

func TestCallsLogWhatEachCallNamed(t *testing.T) {
	srv := newServer(t, asgtest.Hook{Name: "drain"})
	require.NoError(t, srv.ScaleIn(iid))
	token := srv.Actions(iid)[0].Token
	c := client(t, srv)
	before := time.Now()
	_, err := c.RecordLifecycleActionHeartbeat(ctx(t), &autoscaling.RecordLifecycleActionHeartbeatInput{AutoScalingGroupName: aws.String("web"),
		LifecycleHookName: aws.String("drain"), InstanceId: aws.String(iid)})
	require.NoError(t, err)
	_, err = c.CompleteLifecycleAction(ctx(t), &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: aws.String("web"),
		LifecycleHookName: aws.String("drain"), LifecycleActionToken: aws.String(token), LifecycleActionResult: aws.String("ABANDON")})
	require.NoError(t, err)
	_, err = c.DescribeAutoScalingInstances(ctx(t), &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{iid, "i-1"}})
	require.NoError(t, err)
	require.NoError(t, srv.AwaitCalls(ctx(t), "DescribeAutoScalingInstances", 1))

	got := srv.Calls()
	require.Len(t, got, 3)
	for _, c := range got {
		assert.WithinRange(t, c.At, before, time.Now())
	}
	for i := range got {
		got[i].At = time.Time{}
	}
	assert.Equal(t, []asgtest.Call{
		{Action: "RecordLifecycleActionHeartbeat", Group: "web", Hook: "drain", InstanceID: iid, Token: token},
		{Action: "CompleteLifecycleAction", Group: "web", Hook: "drain", InstanceID: iid, Token: token, Result: "ABANDON"},
		{Action: "DescribeAutoScalingInstances", InstanceID: iid + ",i-1"},
	}, got)
}

func TestServeHTTPServesAsTheServerDoes(t *testing.T) {
	srv := newServer(t)
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("Action=DescribeLifecycleHooks&Version=2011-01-01&AutoScalingGroupName=web"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", sigv4)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "<DescribeLifecycleHooksResult><LifecycleHooks></LifecycleHooks></DescribeLifecycleHooksResult>")
	assert.Equal(t, 1, srv.Requests("DescribeLifecycleHooks"))
}

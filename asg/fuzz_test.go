package asg

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Real answers of the Auto Scaling API, as the AWS documentation shows
// them, and its errors.
var apiSeeds = []string{
	`<DescribeLifecycleHooksResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><DescribeLifecycleHooksResult><LifecycleHooks><member>` +
		`<DefaultResult>ABANDON</DefaultResult><LifecycleHookName>my-hook</LifecycleHookName><HeartbeatTimeout>3600</HeartbeatTimeout>` +
		`<AutoScalingGroupName>my-asg</AutoScalingGroupName><GlobalTimeout>172800</GlobalTimeout>` +
		`<LifecycleTransition>autoscaling:EC2_INSTANCE_TERMINATING</LifecycleTransition></member></LifecycleHooks></DescribeLifecycleHooksResult>` +
		`<ResponseMetadata><RequestId>1b2c3d4e-0000-0000-0000-000000000000</RequestId></ResponseMetadata></DescribeLifecycleHooksResponse>`,
	`<DescribeAutoScalingInstancesResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><DescribeAutoScalingInstancesResult><AutoScalingInstances><member>` +
		`<HealthStatus>HEALTHY</HealthStatus><AutoScalingGroupName>my-asg</AutoScalingGroupName><AvailabilityZone>us-west-2b</AvailabilityZone>` +
		`<InstanceId>i-0123456789abcdef0</InstanceId><InstanceType>t3.micro</InstanceType><LifecycleState>Terminating:Wait</LifecycleState>` +
		`<ProtectedFromScaleIn>false</ProtectedFromScaleIn></member></AutoScalingInstances></DescribeAutoScalingInstancesResult>` +
		`<ResponseMetadata><RequestId>1b2c3d4e-0000-0000-0000-000000000000</RequestId></ResponseMetadata></DescribeAutoScalingInstancesResponse>`,
	`<ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>x</RequestId></ErrorResponse>`,
	`<ErrorResponse><Error><Code>ValidationError</Code><Message>No active Lifecycle Action found with instance ID i-0123456789abcdef0</Message></Error></ErrorResponse>`,
	`<DescribeLifecycleHooksResponse><DescribeLifecycleHooksResult><LifecycleHooks><member><HeartbeatTimeout>-5</HeartbeatTimeout>` +
		`<LifecycleTransition>autoscaling:EC2_INSTANCE_TERMINATING</LifecycleTransition></member></LifecycleHooks></DescribeLifecycleHooksResult></DescribeLifecycleHooksResponse>`,
	``, `<`, `not xml at all`,
}

// Whatever the API answers (any bytes, with a success or an error status),
// the calls return without a panic, and a hook they return has a heartbeat
// timeout Auto Scaling allows and a limit within its bounds: bytes from
// the API never make a hold longer than Auto Scaling can keep.
func FuzzAPIAnswers(f *testing.F) {
	for _, s := range apiSeeds {
		f.Add(s, 200)
		f.Add(s, 400)
	}
	var body string
	var status int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	f.Cleanup(srv.Close)
	cfg := Config{Endpoint: srv.URL, Region: "us-east-1", IMDS: imdsAt("http://127.0.0.1:9"),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")}.withDefaults()
	cl, err := newClients(context.Background(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(cl.release)
	f.Fuzz(func(t *testing.T, b string, st int) {
		if st < 200 || st > 599 {
			return
		}
		body, status = b, st
		ctx := context.Background()
		hooks, err := cl.hooks(ctx, time.Second, "my-asg", nil)
		if err != nil && len(hooks) > 0 {
			t.Fatalf("hooks and an error: %v", err)
		}
		for _, h := range hooks {
			if !h.known() {
				continue // held with its end unknown: no deadline from it
			}
			if h.heartbeat <= 0 || h.heartbeat > maxHeartbeatTimeout || h.global <= 0 || h.global > maxGlobalTimeout || h.global > globalFactor*h.heartbeat {
				t.Fatalf("a hook out of Auto Scaling's bounds: %+v", h)
			}
		}
		group, _, err := cl.group(ctx, time.Second, "i-0123456789abcdef0")
		if err == nil && group != "" && !strings.Contains(b, group) {
			t.Fatalf("a group %q that the answer does not name", group)
		}
		_ = cl.heartbeat(ctx, time.Second, "my-asg", "i-0123456789abcdef0", hook{name: "h", heartbeat: time.Minute})
		_ = cl.started(ctx, time.Second, "my-asg", "i-0123456789abcdef0")
	})
}

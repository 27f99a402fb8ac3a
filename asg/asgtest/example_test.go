package asgtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"

	"github.com/termsig/termsig/asg/asgtest"
	"github.com/termsig/termsig/imds/imdstest"
)

// A test of code that holds a scale-in with a termination hook: the fake
// picks the instance, IMDS shows it (through OnTargetState), and the code
// under test, here calls of the SDK, finds its hook, records a heartbeat
// and lets the instance go; a second completion finds no action left.
func Example() {
	md := imdstest.NewServer() // the instance's metadata service
	defer md.Close()
	srv := asgtest.NewServer()
	defer srv.Close()
	srv.OnTargetState = func(_, state string) { md.SetLifecycleState(state) }
	srv.AddGroup("web", asgtest.Hook{Name: "drain", HeartbeatTimeout: 5 * time.Minute})
	srv.AddInstance("i-0123456789abcdef0", "web")
	if err := srv.ScaleIn("i-0123456789abcdef0"); err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	target, err := awsimds.New(awsimds.Options{Endpoint: md.URL}).GetMetadata(ctx, &awsimds.GetMetadataInput{Path: "autoscaling/target-lifecycle-state"})
	if err != nil {
		fmt.Println(err)
		return
	}
	state, _ := io.ReadAll(target.Content)
	fmt.Println("IMDS:", string(state))

	client := autoscaling.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	}, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	hooks, err := client.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("web")})
	if err != nil {
		fmt.Println(err)
		return
	}
	hook := hooks.LifecycleHooks[0]
	fmt.Println(*hook.LifecycleHookName, *hook.HeartbeatTimeout, *hook.GlobalTimeout, srv.State("i-0123456789abcdef0"))

	_, err = client.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: aws.String("web"), LifecycleHookName: hook.LifecycleHookName, InstanceId: aws.String("i-0123456789abcdef0")})
	fmt.Println(err)
	_, err = client.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String("web"), LifecycleHookName: hook.LifecycleHookName, InstanceId: aws.String("i-0123456789abcdef0"),
		LifecycleActionResult: aws.String("CONTINUE")})
	fmt.Println(err, srv.State("i-0123456789abcdef0"))

	_, err = client.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String("web"), LifecycleHookName: hook.LifecycleHookName, InstanceId: aws.String("i-0123456789abcdef0"),
		LifecycleActionResult: aws.String("CONTINUE")})
	var ae smithy.APIError
	if errors.As(err, &ae) {
		fmt.Println(ae.ErrorCode()+":", ae.ErrorMessage())
	}
	// Output:
	// IMDS: Terminated
	// drain 300 30000 Terminating:Wait
	// <nil>
	// <nil> Terminated
	// ValidationError: No active Lifecycle Action found with instance ID i-0123456789abcdef0
}

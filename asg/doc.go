// Package asg is a termsig source that holds an EC2 Auto Scaling scale-in
// until the work is done: when the group picks this instance to go, it
// sends a held [termsig.Notice], keeps the group's termination lifecycle
// hooks waiting with heartbeats, and completes them when the notice is
// released, so that the instance goes as soon as the work is handed back.
//
//	n := termsig.New(signal.New(), asg.New(asg.Config{}))
//	defer n.Stop()
//	nt := <-n.C()
//	if nt.Held {
//		// finish the work; later notices move nt.Deadline
//	}
//	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//	defer cancel()
//	_ = n.Release(rctx, nt) // CompleteLifecycleAction: CONTINUE
//
// It learns of the scale-in from IMDS (autoscaling/target-lifecycle-state
// Terminated, polled by package imds) and asks the Auto Scaling API
// (package github.com/aws/aws-sdk-go-v2/service/autoscaling) for the
// instance's group and hooks only once IMDS says the instance is in a
// group. Use it in place of imds's own lifecycle notice: give the imds
// source Events without imds.LifecycleState, as package sources does, or
// each scale-in is reported twice.
//
// # What it needs
//
// A termination hook on the group:
//
//	aws autoscaling put-lifecycle-hook --auto-scaling-group-name GROUP --lifecycle-hook-name termsig \
//	    --lifecycle-transition autoscaling:EC2_INSTANCE_TERMINATING --heartbeat-timeout 300 --default-result CONTINUE
//
// and, for the instance's role:
//
//	{"Effect": "Allow", "Resource": "*", "Action": [
//	    "autoscaling:DescribeAutoScalingInstances", "autoscaling:DescribeLifecycleHooks",
//	    "autoscaling:RecordLifecycleActionHeartbeat", "autoscaling:CompleteLifecycleAction"]}
//
// autoscaling:DescribeScalingActivities is optional: with it the hold's
// limit counts from the termination's StartTime rather than from when IMDS
// showed it (see [Source.Watch]). Credentials, region and endpoint come
// from the SDK's default chain (the instance profile through IMDS,
// AWS_REGION, AWS_ENDPOINT_URL_AUTO_SCALING), or from [Config].
//
// # Faults
//
// The scale-in is always a notice, from IMDS alone if need be: without a
// hook, without credentials, with an API that is throttled, refuses
// (AccessDenied names the IAM action in Notifier.Status) or hangs (each
// call is bounded by Config.RequestTimeout). Throttling and other failures
// are tried again with backoff within the hold; a hold that lapses is said
// in the log and by a last notice that is not Held. Answers are capped at
// 1 MiB and redirects refused. Package asgtest fakes the API.
package asg

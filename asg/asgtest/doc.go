// Package asgtest provides a fake of the Auto Scaling API for tests of
// termination lifecycle hooks: a real HTTP server on a loopback port that
// speaks the query protocol of the AWS SDK's service/autoscaling, like
// [net/http/httptest] does for HTTP.
//
//	srv := asgtest.NewServer()
//	defer srv.Close()
//	srv.AddGroup("web", asgtest.Hook{Name: "drain", HeartbeatTimeout: 5 * time.Second})
//	srv.AddInstance("i-0123456789abcdef0", "web")
//	srv.ScaleIn("i-0123456789abcdef0") // Terminating:Wait until the hook's action ends
//	// point the client under test at srv.URL (BaseEndpoint, or AWS_ENDPOINT_URL_AUTO_SCALING)
//
// [Server.OnTargetState] mirrors an instance's target lifecycle state
// (Terminated once ScaleIn picked it) into an imdstest.Server.
//
// # Protocol
//
// It answers DescribeAutoScalingInstances, DescribeLifecycleHooks,
// DescribeScalingActivities, RecordLifecycleActionHeartbeat and
// CompleteLifecycleAction with AWS's XML, and errors with AWS's
// ErrorResponse: MissingAuthenticationToken (403) without a SigV4
// Authorization header (the signature is not checked), InvalidAction for
// another action, ValidationError for bad parameters and for "No active
// Lifecycle Action found with instance ID ...", AccessDenied (403) after
// [Server.Deny]. A heartbeat restarts the action's heartbeat timeout,
// never past its global one; when either passes, the hook's DefaultResult
// applies. ABANDON, from a completion or a timeout, ends the instance's
// other actions too; once none is left the instance is Terminated (after
// [Server.SetProceedFor] in Terminating:Proceed), leaves
// DescribeAutoScalingInstances, and its activity is Successful.
//
// # Faults and waiting
//
// [Server.Inject] takes a [github.com/termsig/termsig/termsigtest.Fault]
// keyed by Action, and [ErrorFault] makes one that answers with an AWS
// error such as Throttling. [Server.Stop] and [Server.Start] take the API
// away and bring it back. [Server.Calls] logs each call the server
// answered, and each action that timed out (Action "Timeout");
// [Server.AwaitCalls], [Server.AwaitState] and [Server.AwaitRequests]
// wait without sleeping. [Server.Close] stops every timer and connection.
// All methods are safe for concurrent use.
package asgtest

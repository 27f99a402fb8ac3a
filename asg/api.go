package asg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/termsig/termsig/internal/httpguard"
)

// transitionTerminating is the LifecycleTransition of a termination hook.
const transitionTerminating = "autoscaling:EC2_INSTANCE_TERMINATING"

// maxBody bounds what is read of one answer, of IMDS or of the API: real
// ones are at most a few kilobytes.
const maxBody = 1 << 20

// A hook is a termination hook of the instance's group.
type hook struct {
	name      string
	heartbeat time.Duration // HeartbeatTimeout; 0 when it is not one Auto Scaling allows
	global    time.Duration // the longest wait: min(48 h, 100 × heartbeat, GlobalTimeout)
}

// known reports whether the source can tell when h's hold ends.
func (h hook) known() bool { return h.heartbeat > 0 }

// clients are the SDK clients of a Source: one for IMDS (the instance
// id, and the region and credentials of the API) and one for the API.
type clients struct {
	imds    *awsimds.Client
	api     *autoscaling.Client
	release func() // closes their idle connections
}

// newClients returns the clients of cfg. It reads the SDK's shared
// configuration and the environment; it touches the network only to learn
// the region from IMDS when nothing else names one, within ctx.
func newClients(ctx context.Context, cfg Config) (*clients, error) {
	itr := httpguard.NewTransport(250*time.Millisecond, 2, nil)
	ihc, iunguard := httpguard.Guard(&http.Client{Transport: itr}, maxBody)
	iopts := awsimds.Options{Endpoint: cfg.IMDS.Endpoint, HTTPClient: ihc}
	if cfg.IMDS.Endpoint != "" {
		iopts.ClientEnableState = awsimds.ClientEnabled
	}
	ic := awsimds.New(iopts)

	opts := []func(*config.LoadOptions) error{
		// A client the SDK can build on, so that AWS_CA_BUNDLE (or
		// ca_bundle in the shared config) applies; the API's calls go
		// through its transport, guarded (see below).
		config.WithHTTPClient(awshttp.NewBuildableClient()),
		// Retries are the source's own, within the hold's time (see
		// retryable): the SDK's would wait out seconds of backoff, and
		// its retry quota, once drained, refuses them for good.
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		config.WithEC2IMDSRegion(func(o *config.UseEC2IMDSRegion) { o.Client = ic }),
		config.WithEC2RoleCredentialOptions(func(o *ec2rolecreds.Options) { o.Client = ic }),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	awsCfg, err := config.LoadDefaultConfig(rctx, opts...)
	if err != nil {
		iunguard()
		itr.CloseIdleConnections()
		return nil, fmt.Errorf("asg: the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		iunguard()
		itr.CloseIdleConnections()
		return nil, errors.New("asg: no region: neither Config.Region, AWS_REGION, the shared config nor IMDS names one")
	}
	// The SDK's transport (the environment's proxy, the CA bundle), with
	// answers capped and redirects refused: the SDK reads each answer
	// whole.
	var atr *http.Transport
	if bc, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		atr = bc.GetTransport()
	} else {
		atr = http.DefaultTransport.(*http.Transport).Clone()
	}
	ahc, aunguard := httpguard.Guard(&http.Client{Transport: atr}, maxBody)
	release := func() {
		iunguard()
		aunguard()
		itr.CloseIdleConnections()
		atr.CloseIdleConnections()
	}
	api := autoscaling.NewFromConfig(awsCfg, func(o *autoscaling.Options) {
		o.HTTPClient = ahc
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	return &clients{imds: ic, api: api, release: release}, nil
}

// instanceID reads this instance's id from IMDS.
func (c *clients) instanceID(ctx context.Context, timeout time.Duration) (string, error) {
	body, err := c.get(ctx, timeout, "instance-id")
	if err != nil {
		return "", fmt.Errorf("asg: the instance id from IMDS: %w", err)
	}
	id := strings.TrimSpace(body)
	if !validInstanceID(id) {
		return "", fmt.Errorf("asg: IMDS's instance-id %q is not an instance id", abbrev(id))
	}
	return id, nil
}

// lifecycleState reads autoscaling/target-lifecycle-state: "" when IMDS
// answers 404 (the instance is in no group).
func (c *clients) lifecycleState(ctx context.Context, timeout time.Duration) (string, error) {
	body, err := c.get(ctx, timeout, "autoscaling/target-lifecycle-state")
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("asg: the lifecycle state from IMDS: %w", err)
	}
	return strings.TrimSpace(body), nil
}

// get reads one metadata path within timeout.
func (c *clients) get(ctx context.Context, timeout time.Duration, path string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := c.imds.GetMetadata(rctx, &awsimds.GetMetadataInput{Path: path})
	if err != nil {
		return "", err
	}
	defer out.Content.Close()
	b, err := io.ReadAll(io.LimitReader(out.Content, 256))
	return string(b), err
}

// group returns the group of instance id and the instance's lifecycle
// state there: "" and nil when the API knows the instance in no group.
func (c *clients) group(ctx context.Context, timeout time.Duration, id string) (name, state string, err error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := c.api.DescribeAutoScalingInstances(rctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return "", "", apiErr("DescribeAutoScalingInstances", err)
	}
	for _, in := range out.AutoScalingInstances {
		if aws.ToString(in.InstanceId) == id {
			return aws.ToString(in.AutoScalingGroupName), aws.ToString(in.LifecycleState), nil
		}
	}
	return "", "", nil
}

// hooks returns the termination hooks of group, or those of them named
// in names if any. A hook whose HeartbeatTimeout is not one Auto Scaling
// allows (0, negative, above 7200 s) is returned with heartbeat 0: it may
// hold the instance, but the source cannot tell when its hold ends.
func (c *clients) hooks(ctx context.Context, timeout time.Duration, group string, names []string) ([]hook, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := c.api.DescribeLifecycleHooks(rctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String(group)})
	if err != nil {
		return nil, apiErr("DescribeLifecycleHooks", err)
	}
	var hs []hook
	for _, h := range out.LifecycleHooks {
		name := aws.ToString(h.LifecycleHookName)
		if aws.ToString(h.LifecycleTransition) != transitionTerminating || name == "" || len(names) > 0 && !slices.Contains(names, name) {
			continue
		}
		hb := time.Duration(aws.ToInt32(h.HeartbeatTimeout)) * time.Second
		if hb <= 0 || hb > maxHeartbeatTimeout {
			hs = append(hs, hook{name: name})
			continue
		}
		global := min(maxGlobalTimeout, globalFactor*hb)
		if g := time.Duration(aws.ToInt32(h.GlobalTimeout)) * time.Second; g > 0 {
			global = min(global, g)
		}
		hs = append(hs, hook{name: name, heartbeat: hb, global: global})
	}
	return hs, nil
}

// started returns when the termination activity of instance id in group
// began, or the zero time if the API does not say (this call is optional:
// its IAM action is not among those the package needs).
func (c *clients) started(ctx context.Context, timeout time.Duration, group, id string) time.Time {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := c.api.DescribeScalingActivities(rctx, &autoscaling.DescribeScalingActivitiesInput{
		AutoScalingGroupName: aws.String(group), MaxRecords: aws.Int32(20)})
	if err != nil {
		return time.Time{}
	}
	for _, a := range out.Activities {
		if strings.Contains(aws.ToString(a.Description), id) && strings.HasPrefix(aws.ToString(a.Description), "Terminating") {
			return aws.ToTime(a.StartTime)
		}
	}
	return time.Time{}
}

// heartbeat records a heartbeat for instance id on hook h of group.
func (c *clients) heartbeat(ctx context.Context, timeout time.Duration, group, id string, h hook) error {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := c.api.RecordLifecycleActionHeartbeat(rctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String(h.name), InstanceId: aws.String(id)})
	return apiErr("RecordLifecycleActionHeartbeat", err)
}

// complete completes the lifecycle action of instance id on hook h of
// group with CONTINUE.
func (c *clients) complete(ctx context.Context, timeout time.Duration, group, id string, h hook) error {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := c.api.CompleteLifecycleAction(rctx, &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String(h.name), InstanceId: aws.String(id),
		LifecycleActionResult: aws.String("CONTINUE")})
	return apiErr("CompleteLifecycleAction", err)
}

// An callError is the failure of one API call, in words that do not
// change from call to call.
type callError struct {
	action string // such as "RecordLifecycleActionHeartbeat"
	code   string // the API's error code, or "" for a failure to get an answer
	err    error
}

func (e *callError) Error() string {
	switch e.code {
	case "AccessDenied", "AccessDeniedException", "UnauthorizedOperation":
		return fmt.Sprintf("asg: access denied to autoscaling:%s: allow it to the instance's role (see the asg package documentation)", e.action)
	case "":
		return fmt.Sprintf("asg: %s: %v", e.action, e.err)
	}
	return fmt.Sprintf("asg: %s: %s", e.action, e.code)
}

func (e *callError) Unwrap() error { return e.err }

// apiErr returns err as a *callError of action, or nil.
func apiErr(action string, err error) error {
	if err == nil {
		return nil
	}
	ce := &callError{action: action, err: err}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		ce.code = ae.ErrorCode()
	}
	return ce
}

// denied reports whether err is an AccessDenied of the API.
func denied(err error) bool {
	var ce *callError
	return errors.As(err, &ce) && strings.HasPrefix(ce.code, "AccessDenied") || errors.As(err, &ce) && ce.code == "UnauthorizedOperation"
}

// noAction reports whether err says that the instance has no active
// lifecycle action on the hook: its hold is over.
func noAction(err error) bool {
	var ce *callError
	var ae smithy.APIError
	return errors.As(err, &ce) && ce.code == "ValidationError" && errors.As(err, &ae) &&
		strings.Contains(ae.ErrorMessage(), "No active Lifecycle Action")
}

// abbrev returns s cut to a length fit for an error.
func abbrev(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

package asg

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/termsig/termsig/imds"
)

// The defaults of the [Config] fields of the same names.
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultMaxBackoff     = 5 * time.Minute
)

// Limits of Auto Scaling that no hook can pass: a lifecycle action waits at
// most min(maxGlobalTimeout, globalFactor × HeartbeatTimeout).
const (
	maxGlobalTimeout    = 48 * time.Hour
	globalFactor        = 100
	maxHeartbeatTimeout = 7200 * time.Second
)

// Config configures a [Source]. The zero Config works on an instance with
// an instance profile: IMDS at its usual address, the SDK's credentials,
// region and endpoint. A Config that cannot work makes [Source.Watch] and
// [Source.Available] return an error naming the field; [New] never fails.
type Config struct {
	// IMDS says where IMDS is and how autoscaling/target-lifecycle-state
	// is polled (see package imds; its Events are ignored). The same
	// endpoint serves the instance id and, unless Region and Credentials
	// say otherwise, the region and the instance profile's credentials.
	IMDS imds.Config

	// Endpoint is the Auto Scaling API's base URL, such as
	// "http://127.0.0.1:1341" for package asgtest. Empty means the SDK's:
	// AWS_ENDPOINT_URL_AUTO_SCALING (or AWS_ENDPOINT_URL) if set, else the
	// region's.
	Endpoint string

	// Region is the region of the Auto Scaling API. Empty means the SDK's
	// chain: AWS_REGION, the shared config files, then IMDS.
	Region string

	// Credentials sign the API calls. Nil means the SDK's default chain:
	// the environment, the shared files, web identity, the container's,
	// then the instance profile through IMDS.
	Credentials aws.CredentialsProvider

	// RequestTimeout bounds each API call and each IMDS read of the
	// source's own. Zero means [DefaultRequestTimeout] (5 s).
	RequestTimeout time.Duration

	// MaxBackoff caps the wait between attempts at a call that keeps
	// failing outside a hold (the first look at the group). Inside a hold
	// calls are tried again within the hold's time. Zero means
	// [DefaultMaxBackoff] (5 minutes).
	MaxBackoff time.Duration

	// MaxHold bounds how long the source keeps a termination held, from
	// when the instance started to wait: it sends no heartbeat that would
	// take the hold past it. Zero means the hook's own limit, which is
	// also the most it can be: min(48 h, 100 × HeartbeatTimeout) or the
	// hook's GlobalTimeout.
	MaxHold time.Duration

	// Hooks names the termination hooks the source keeps and completes.
	// Empty means every termination hook of the group; name only yours
	// when other parties (a Lambda, a drainer) own hooks of the group, so
	// that the source neither heartbeats nor completes theirs.
	Hooks []string

	// InstanceID is this instance's id. Empty means IMDS's instance-id.
	InstanceID string

	// Logger receives what the source says besides its health, which it
	// reports to the Notifier: each hold and each lapse. Nil means
	// slog.Default().
	Logger *slog.Logger

	// backoffBase is the first wait before a call is tried again inside a
	// hold; zero means a tenth of the heartbeat timeout, at most 1 s.
	backoffBase time.Duration
}

// withDefaults returns c with each zero field set to its default.
func (c Config) withDefaults() Config {
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.IMDS.Events = imds.LifecycleState
	if c.IMDS.Logger == nil {
		c.IMDS.Logger = c.Logger
	}
	return c
}

// validate returns what makes c unable to work, or nil. Every error
// starts "asg: " and names the field.
func (c Config) validate() error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return fmt.Errorf("asg: Config.Endpoint %q is not an absolute http or https URL with a host", c.Endpoint)
		}
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"RequestTimeout", c.RequestTimeout},
		{"MaxBackoff", c.MaxBackoff},
		{"MaxHold", c.MaxHold},
	} {
		if d.value < 0 {
			return fmt.Errorf("asg: Config.%s is negative (%v)", d.name, d.value)
		}
	}
	if c.InstanceID != "" && !validInstanceID(c.InstanceID) {
		return fmt.Errorf("asg: Config.InstanceID %q is not an instance id (i- and 8 or 17 hex digits)", c.InstanceID)
	}
	return nil
}

// validInstanceID reports whether id looks like an EC2 instance id.
func validInstanceID(id string) bool {
	if len(id) != 10 && len(id) != 19 || id[:2] != "i-" {
		return false
	}
	for _, c := range id[2:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

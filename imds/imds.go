package imds

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/host"
)

// Name is the name of the source, in notices and in Notifier.Status.
const Name = "imds"

// The metadata paths the source polls, relative to /latest/meta-data/.
const (
	PathInstanceAction = "spot/instance-action"
	PathRebalance      = "events/recommendations/rebalance"
	PathScheduled      = "events/maintenance/scheduled"
	PathLifecycle      = "autoscaling/target-lifecycle-state"
)

// The events of [termsig.Notice.Event] that the source sends. A scheduled
// maintenance event is eventScheduled followed by its EventId, such as
// "scheduled/instance-event-0d59937288b749b32".
const (
	eventSpot      = "spot/instance-action"
	eventLifecycle = "asg/lifecycle"
	eventRebalance = "rebalance"
	eventScheduled = "scheduled/"
)

// Defaults of [Config].
const (
	DefaultInterval         = time.Second
	DefaultAdvisoryInterval = 30 * time.Second
	DefaultTimeout          = 2 * time.Second
	DefaultMaxBackoff       = 10 * time.Second
)

// MinInterval is the shortest Config.Interval or Config.AdvisoryInterval
// that Watch accepts. IMDS throttles each instance, and its link-local
// traffic shares one packet allowance with DNS and NTP: polling faster
// would hammer the metadata service (and starve DNS) for no gain, since a
// spot interruption comes about two minutes ahead. Tests poll at
// MinInterval.
const MinInterval = 10 * time.Millisecond

// Events selects what a [Source] watches.
type Events uint8

// The events a Source can watch.
const (
	// SpotInterruption: spot/instance-action (urgent).
	SpotInterruption Events = 1 << iota
	// LifecycleState: autoscaling/target-lifecycle-state (urgent).
	LifecycleState
	// RebalanceRecommendation: events/recommendations/rebalance (advisory).
	RebalanceRecommendation
	// ScheduledMaintenance: events/maintenance/scheduled (advisory).
	ScheduledMaintenance

	// AllEvents is every event above.
	AllEvents = SpotInterruption | LifecycleState | RebalanceRecommendation | ScheduledMaintenance
)

// Config configures a [Source]. The zero Config watches every event at the
// default intervals on the SDK's default endpoint. A Config that cannot
// work (see each field) makes [Source.Watch] and [Source.Available] return
// an error that names the field; [New] never fails.
type Config struct {
	// Endpoint is the IMDS base URL, such as "http://127.0.0.1:1338": an
	// absolute http or https URL with a host. Empty means the SDK's
	// default: AWS_EC2_METADATA_SERVICE_ENDPOINT if set (it must be such
	// a URL too), else http://169.254.169.254.
	Endpoint string

	// Client is the SDK client to use; it overrides Endpoint, and is used
	// as it is (its own retryer, timeouts and AWS_EC2_METADATA_DISABLED
	// handling). Nil means a client made for the source: waits between
	// the SDK's attempts scaled to Interval, no retry quota, connections
	// closed when Watch returns.
	Client *awsimds.Client

	// Interval is how often the urgent paths (spot/instance-action,
	// autoscaling/target-lifecycle-state) are polled, start to start.
	// Zero means DefaultInterval (1 s); otherwise it must be at least
	// MinInterval (10 ms).
	Interval time.Duration

	// AdvisoryInterval is how often the advisory paths (rebalance
	// recommendation, scheduled maintenance) are polled. Zero means
	// DefaultAdvisoryInterval (30 s); otherwise it must be at least
	// MinInterval.
	AdvisoryInterval time.Duration

	// Timeout bounds one poll of one path, the SDK's own retries included.
	// Zero means DefaultTimeout (2 s); it must not be negative.
	Timeout time.Duration

	// MaxBackoff caps the wait between polls of a path that keeps failing:
	// after n failures in a row the wait is the path's interval times
	// 2^(n-1), up to MaxBackoff (or the interval, if that is longer). The
	// urgent paths are capped further, at 4×Interval, so that throttling
	// delays a spot interruption by seconds, not a tenth of its notice.
	// Zero means DefaultMaxBackoff (10 s); it must not be negative.
	MaxBackoff time.Duration

	// Events selects what to watch. Zero means AllEvents; other bits than
	// those of AllEvents are an error.
	Events Events

	// Logger receives, at debug level, each notice the source sends.
	// Health is not logged here: the source reports it with
	// termsig.ReportError, and the Notifier logs each change. Nil means
	// slog.Default(), as it is when Watch starts.
	Logger *slog.Logger

	// Root is where host facts (DMI under sys/class/dmi/id) are read;
	// empty means "/". Tests point it at a directory of their own.
	Root string
}

// withDefaults returns c with each zero field set to its default. Invalid
// values are left alone: validate reports them.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Interval, DefaultInterval)
	def(&c.AdvisoryInterval, DefaultAdvisoryInterval)
	def(&c.Timeout, DefaultTimeout)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	if c.Events == 0 {
		c.Events = AllEvents
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Root == "" {
		c.Root = "/"
	}
	return c
}

// A Source watches the EC2 instance metadata service for spot
// interruptions, rebalance recommendations, scheduled maintenance and Auto
// Scaling lifecycle changes. Create it with [New]. A Source may be watched
// by several Notifiers at once; each Watch polls on its own.
//
// It polls the same way on Linux, macOS and Windows. Where no endpoint is
// configured it first recognises EC2 from the firmware, which it can read
// on Linux and Windows but not on macOS (see [Source.Available]).
type Source struct {
	cfg Config // as given to New
}

// New returns a Source configured by cfg. It does not check cfg: Watch
// does, so that a mistake shows as a failed source in Notifier.Status and
// the Notifier's log rather than as a panic.
func New(cfg Config) *Source { return &Source{cfg: cfg} }

// Name returns "imds".
func (s *Source) Name() string { return Name }

// ReportsReady returns false: Source is a termsig.ReadyReporter whose first
// look needs the network, so termsig.New does not wait for it. Watch calls
// termsig.Ready once every path it polls has had its first answer or its
// first error; Notifier.Ready waits for that.
func (s *Source) ReportsReady() bool { return false }

// Available returns, from local facts only and without touching the
// network, the error that Watch would return at once, or nil if Watch
// would start polling:
//
//   - an error that does not wrap termsig.ErrUnavailable if the Config
//     cannot work (an Endpoint or AWS_EC2_METADATA_SERVICE_ENDPOINT that is
//     not an http or https URL, a negative duration, an interval below
//     MinInterval, unknown Events), whatever the host;
//   - nil when a Client or Endpoint is configured, when
//     AWS_EC2_METADATA_SERVICE_ENDPOINT is set, or when the firmware says
//     the host is an EC2 instance (DMI on Linux, the registry's BIOS values
//     on Windows; macOS shows neither, so set an endpoint there);
//   - otherwise an error wrapping termsig.ErrUnavailable.
//     AWS_EC2_METADATA_DISABLED=true makes the source unavailable unless a
//     Client or Endpoint is configured.
//
// A caller that picks sources by Available should keep a source whose
// error does not wrap termsig.ErrUnavailable, so that a mistake in its
// Config shows as a failed source instead of dropping it without a word.
func (s *Source) Available() error {
	in := host.Detect(s.cfg.withDefaults().Root, nil)
	if err := s.cfg.validate(in); err != nil {
		return err
	}
	if s.cfg.Client != nil || s.cfg.Endpoint != "" {
		return nil
	}
	switch {
	case in.IMDSDisabled:
		return fmt.Errorf("imds: disabled by AWS_EC2_METADATA_DISABLED: %w", termsig.ErrUnavailable)
	case in.IMDSEndpoint != "":
		return nil
	case !in.EC2:
		return fmt.Errorf("imds: not an EC2 instance (by its firmware) and no endpoint configured: %w", termsig.ErrUnavailable)
	}
	return nil
}

// Watch polls IMDS until ctx is done and sends a notice for each new event.
// Each notice's Event names the event, unique within the source:
//
//   - spot/instance-action: Terminate, Stop or Hibernate by its action,
//     with Deadline its time, Event "spot/instance-action". One
//     interruption is reported once, even when its time moves between
//     polls; again only if the action changes or the path went back to 404
//     in between.
//   - autoscaling/target-lifecycle-state Terminated: Terminate, deadline
//     unknown, Event "asg/lifecycle". Other states send nothing.
//   - events/recommendations/rebalance: Rebalance once; Cleared if it goes
//     back to 404. Both have Event "rebalance".
//   - events/maintenance/scheduled: Maintenance for each active EventId
//     (again if its NotBefore changes), with Deadline its NotBefore;
//     Cleared when it turns canceled or completed, or disappears. Both
//     have Event "scheduled/" + EventId.
//
// A 404 means nothing pending (for scheduled events, which IMDS lists as
// [] when there are none, a 404 changes nothing). Errors (IMDS
// unreachable, 401, 429, 5xx, timeouts, bodies that cannot be what IMDS
// sends) never make a notice: the path is polled again with backoff (see
// Config.MaxBackoff), and the error, in a few words that do not change from
// poll to poll or path to path, shows in Notifier.Status through
// termsig.ReportError; the Notifier logs each change.
//
// Its first look is the first poll of every path it watches: once each
// has had an answer (a 404 included) or an error (a timeout included), and
// the notices of those answers are handed over, Watch calls termsig.Ready.
// It can take up to Config.Timeout when IMDS does not answer.
//
// Watch returns at once, without a network probe, an error wrapping
// termsig.ErrUnavailable when [Source.Available] says so, and another
// error, starting "imds: ", when the Config cannot work.
func (s *Source) Watch(ctx context.Context, out chan<- termsig.Notice) error {
	if err := s.Available(); err != nil {
		return err
	}
	cfg := s.cfg.withDefaults()
	client, release := cfg.client()
	defer release()
	w := newWatcher(ctx, &cfg, client, out)
	var wg sync.WaitGroup
	for _, p := range w.pollers {
		wg.Go(func() { w.loop(ctx, p) })
	}
	wg.Wait()
	return ctx.Err()
}

var _ termsig.ReadyReporter = (*Source)(nil)

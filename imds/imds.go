package imds

import (
	"context"
	"fmt"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/host"
)

// Name is the name of the source, in notices and in Notifier.Status.
const Name = "imds"

// The metadata paths the source polls, relative to /latest/meta-data/
// (package imdstest exports them, for tests).
const (
	pathInstanceAction = "spot/instance-action"
	pathRebalance      = "events/recommendations/rebalance"
	pathScheduled      = "events/maintenance/scheduled"
	pathLifecycle      = "autoscaling/target-lifecycle-state"
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

// Available returns, from local facts only and without touching the
// network, the error that Watch would return at once, or nil if Watch
// would start polling:
//
//   - an error that does not wrap termsig.ErrUnavailable if the Config
//     cannot work (an Endpoint or AWS_EC2_METADATA_SERVICE_ENDPOINT that is
//     not an http or https URL, a negative duration, an interval below
//     FloorInterval, unknown Events), whatever the host;
//   - nil when an Endpoint is configured, when
//     AWS_EC2_METADATA_SERVICE_ENDPOINT is set, or when the firmware's
//     SMBIOS strings say the host is an EC2 instance ("Amazon EC2", for
//     Nitro, or Amazon's Xen; DMI on Linux, the registry's BIOS values on
//     Windows; macOS shows neither, so set an endpoint there);
//   - otherwise an error wrapping termsig.ErrUnavailable.
//     AWS_EC2_METADATA_DISABLED=true makes the source unavailable unless an
//     Endpoint is configured.
//
// A caller that picks sources by Available should keep a source whose
// error does not wrap termsig.ErrUnavailable, so that a mistake in its
// Config shows as a failed source instead of dropping it without a word.
func (s *Source) Available() error {
	root := s.cfg.withDefaults().Root
	in := host.Detect(root, nil)
	if err := s.cfg.validate(in); err != nil {
		return err
	}
	if s.cfg.Endpoint != "" {
		return nil
	}
	switch {
	case in.IMDSDisabled:
		return fmt.Errorf("imds: disabled by AWS_EC2_METADATA_DISABLED: %w", termsig.ErrUnavailable)
	case in.IMDSEndpoint != "":
		return nil
	case !in.EC2:
		return fmt.Errorf("imds: not an EC2 instance (%s), and neither Config.Endpoint nor AWS_EC2_METADATA_SERVICE_ENDPOINT is set: %w",
			host.ReadBIOS(root).Quote("sys_vendor", "board_vendor", "bios_vendor", "bios_version"), termsig.ErrUnavailable)
	}
	return nil
}

// Watch polls IMDS until ctx is done and sends a notice for each new event.
// Each notice's Event names the event, unique within the source:
//
//   - spot/instance-action: Terminate, Stop or Hibernate by its action,
//     with Deadline its time (zero if the time is missing or not an RFC
//     3339 string: the action alone is reason enough to leave), Event
//     "spot/instance-action". One interruption is reported once, even
//     when its time moves between polls; again only if the action changes
//     or the path went back to 404 in between.
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
// poll to poll or path to path, is reported with [termsig.Run.Report] (the
// error of the path that has failed longest), so that it shows in
// Notifier.Status; the Notifier logs each change.
//
// Its first look is the first poll of every path it watches: once each
// has had an answer (a 404 included) or an error (a timeout included), and
// the notices of those answers are on Notifier.C, Watch calls
// [termsig.Run.Ready]. It can take up to Config.RequestTimeout when IMDS
// does not answer. The first look needs the network, so the Source has no
// Traits method: [termsig.New] does not wait for it, Notifier.Ready does.
//
// Watch returns at once, without a network probe, an error wrapping
// termsig.ErrUnavailable when [Source.Available] says so, and another
// error, starting "imds: ", when the Config cannot work.
func (s *Source) Watch(ctx context.Context, r *termsig.Run) error {
	if err := s.Available(); err != nil {
		return err
	}
	cfg := s.cfg.withDefaults()
	client, release := cfg.client()
	defer release()
	newWatcher(cfg, client, r).run(ctx)
	return ctx.Err()
}

var _ termsig.Detector = (*Source)(nil)

// Package imds watches the EC2 instance metadata service (IMDS) for notices
// that the instance is going away or at risk: spot interruptions, Auto
// Scaling lifecycle changes, rebalance recommendations and scheduled
// maintenance.
//
//	n := termsig.New(imds.New(imds.Config{}))
//	defer n.Stop()
//
// IMDS has no push, so [Source] polls below /latest/meta-data/ with IMDSv2
// session tokens, through the AWS SDK (feature/ec2/imds): a 401 is tried
// again at once with a fresh token; any other failure waits for the next
// poll, with no second layer of retries.
//
// # Notices
//
// Each notice's Event names what it is about, so that a consumer can keep
// one reason per event and drop it when a Cleared notice names it:
//
//   - "spot/instance-action": Terminate, Stop or Hibernate, with Deadline
//     the interruption's time (about two minutes ahead);
//   - "asg/lifecycle": Terminate when the lifecycle state is Terminated;
//   - "rebalance": Rebalance, then Cleared when it goes;
//   - "scheduled/" + EventId: Maintenance with Deadline its NotBefore,
//     then Cleared when it is canceled, completed or gone.
//
// [Source.Watch] says when each is sent again.
//
// # Cadence
//
// Each path is polled in its own goroutine, so a slow answer on one does
// not delay the others:
//
//   - spot/instance-action every [Config.Interval] (1 s);
//   - rebalance every [Config.AdvisoryInterval] (3 s);
//   - the lifecycle state at one of the two (see their docs);
//   - scheduled events every 30 s.
//
// While advice holds (a rebalance recommendation, an active scheduled
// event, a lifecycle state of Standby, Detached, Warmed:* or Terminated),
// the paths polled every Interval are polled every 250 ms until it clears.
// DESIGN.md has the reasons and the request rates.
//
// # First look
//
// The first look needs the network, so [termsig.New] does not wait for it.
// Once every watched path has had one answer (404 included) or one error,
// and its notices are on Notifier.C, the source calls [termsig.Run.Ready]
// and [termsig.Notifier.Ready] can close: within [Config.RequestTimeout]
// (2 s) against an IMDS that does not answer.
//
// # Faults
//
// No error makes a notice: IMDS unreachable, 401, bursts of 429 or 503,
// late answers, truncated JSON, an HTML page with status 200, a redirect,
// an answer past 1 MiB. The source keeps running, backs off (doubling per
// failure up to [Config.MaxBackoff]) and reports the error with
// [termsig.Run.Report], so it shows in [termsig.Notifier.Status]: that of
// the path failing longest, in stable text without URLs ("imds:
// unreachable: connection refused"), so one outage is one log line. A bad
// answer for scheduled events never reads as "the events are gone".
// Redirects are refused, never followed, and answers are cut off past
// 1 MiB of body or 64 KiB of head (see [Config.HTTPClient]). When ctx is
// done, requests in flight are cancelled and Watch returns at once.
//
// A Config that cannot work (a bad endpoint URL, a negative duration, an
// interval below FloorInterval, unknown Events) is no fault to retry:
// Watch returns an error starting "imds: " at once, and the Notifier marks
// the source failed.
//
// # Where it applies
//
// Polling works alike on Linux, macOS and Windows. With no endpoint
// configured ([Config.Endpoint] or AWS_EC2_METADATA_SERVICE_ENDPOINT), the
// source recognises EC2 from the firmware alone, without a network probe
// (DMI under [Config.Root] on Linux, the registry's BIOS values on
// Windows); elsewhere, and on macOS, Watch returns an error wrapping
// [termsig.ErrUnavailable] at once: on an EC2 Mac set an endpoint. See
// [Source.Available].
//
// # Testing
//
// Package [github.com/termsig/termsig/imds/imdstest] is a fake IMDS on
// loopback that speaks IMDSv2, schedules every notice above and injects
// faults ([github.com/termsig/termsig/imds/imdstest.Server.Inject]);
// programs use it in their own tests too.
package imds

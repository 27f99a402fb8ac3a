// Package imds watches the EC2 instance metadata service (IMDS) for notices
// that the instance is going away or at risk: spot interruptions, Auto
// Scaling lifecycle changes, rebalance recommendations and scheduled
// maintenance.
//
// # Polling
//
// IMDS has no push or long polling, so [Source] polls. The urgent paths,
// spot/instance-action and autoscaling/target-lifecycle-state, are polled
// every Config.Interval (1 s by default); the advisory ones,
// events/recommendations/rebalance and events/maintenance/scheduled, every
// Config.AdvisoryInterval (30 s). At the defaults that is about 2.07
// requests a second, plus a token every five minutes. Each path has its own
// goroutine, so a slow answer on one path does not delay the others. A spot
// interruption is announced about two minutes ahead; polling every second
// rather than every two or five spends little of that.
//
// HTTP, IMDSv2 session tokens (and a fresh token after a 401) and retries
// within one poll are the AWS SDK's (feature/ec2/imds); the waits between
// the SDK's attempts are scaled to the interval and its retry quota is off,
// since the source's own backoff between polls is what protects IMDS.
//
// # Faults
//
// No error makes a notice: IMDS unreachable, 401, bursts of 429 or 503,
// answers slower than Config.Timeout, truncated JSON, an HTML page with
// status 200. The source keeps running, backs off (the interval doubles per
// failure up to Config.MaxBackoff, every wait watching ctx), reports the
// error through termsig.ReportError so that it shows in
// termsig.Notifier.Status, and logs once per change of state. A bad answer
// for scheduled events never reads as "the events are gone".
//
// # Host detection
//
// Watch returns termsig.ErrUnavailable at once, without a network probe,
// when no endpoint is configured (Config.Endpoint, Config.Client or
// AWS_EC2_METADATA_SERVICE_ENDPOINT) and DMI does not say EC2 (sys_vendor or
// board_vendor "Amazon EC2", or a product or hypervisor UUID starting with
// "ec2"). DMI is read on Linux; elsewhere, set an endpoint. See
// [Source.Available].
//
// # Testing
//
// Package imdstest is a fake IMDS on loopback that speaks IMDSv2 and can
// schedule every notice above and inject faults.
package imds

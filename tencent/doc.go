// Package tencent reports the reclaim of a Tencent Cloud CVM spot
// instance as a [termsig.Source], by polling the instance metadata
// service.
//
//	n := termsig.New(tencent.New(tencent.Config{}))
//	defer n.Stop()
//
// # Notices
//
// The source polls /latest/meta-data/spot/termination-time of the metadata
// service every [Config.Interval] (1 s). It answers 404 until the instance
// is to be reclaimed, two minutes ahead, and then the time of the reclaim
// in China Standard Time, UTC+8, with no zone in the text ("2018-08-18
// 12:05:33" is 04:05:33 UTC):
//
//   - the first time is [termsig.Terminate] with that time as Deadline,
//     Event [EventTermination] and Raw the answer;
//   - a time earlier than the one reported is Terminate again, with the
//     earlier Deadline; the same time, or a later one, sends nothing;
//   - a 404 after a notice is [termsig.Cleared], with the same Event.
//
// # The service's address
//
// Tencent documents the service as http://metadata.tencentyun.com. The
// source asks its address, 169.254.0.23 ([DefaultEndpoint]), which
// cloud-init's Tencent Cloud data source tries first, so that a poll needs
// no lookup and a resolver that is slow or down delays neither a notice
// nor Stop. [Config.Endpoint] or TENCENT_METADATA_ENDPOINT ([EndpointEnv])
// sets another, such as the name.
//
// # Failures
//
// Nothing the service or the network does makes a notice by itself:
// errors (unreachable, 403, 429, 5xx, no answer within
// [Config.RequestTimeout]) and answers that are not a time (an empty body,
// an HTML page) or a time more than an hour past or a day ahead (a
// placeholder: the epoch, the year 9999) are retried with backoff up to
// [Config.MaxBackoff] and shown in [termsig.Notifier.Status], in a stable
// text ("tencent: HTTP 503: Service Unavailable"); an earlier notice is
// neither sent again nor cleared. Redirects are refused, never followed, and answers are cut off
// past 64 KiB of body or head. When the Watch context is done, requests in
// flight are cancelled and Watch returns at once.
//
// # Where it applies
//
// [Source.Available] and Watch return an error wrapping
// termsig.ErrUnavailable, without a network probe, unless the firmware's
// product name is "Tencent Cloud CVM" (DMI on Linux, the registry's BIOS
// values on Windows) or an endpoint is configured. A Config that cannot
// work makes both return an error naming the field.
//
// # Testing
//
// Package [github.com/termsig/termsig/tencent/tencenttest] is a fake
// metadata service on loopback, with a settable termination time and
// injected faults.
package tencent

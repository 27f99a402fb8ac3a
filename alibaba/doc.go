// Package alibaba reports the release of an Alibaba Cloud ECS spot
// (preemptible) instance as a [termsig.Source], by polling the instance
// metadata service.
//
//	n := termsig.New(alibaba.New(alibaba.Config{}))
//	defer n.Stop()
//
// # Notices
//
// The source polls http://100.100.100.200/latest/meta-data/instance/spot/termination-time
// every [Config.Interval] (1 s). It answers 404 until the instance is to be
// released, about five minutes ahead, and then the time of the release, in
// UTC ("2015-01-05T18:02:00Z"):
//
//   - the first time is [termsig.Terminate] with that time as Deadline,
//     Event [EventTermination] and Raw the answer;
//   - a time earlier than the one reported is Terminate again, with the
//     earlier Deadline; the same time, or a later one, sends nothing;
//   - a 404 after a notice is [termsig.Cleared], with the same Event.
//
// # Tokens
//
// Requests carry a token of the security hardening mode (PUT
// /latest/api/token, then the header X-aliyun-ecs-metadata-token), which
// is renewed before it expires and at once after a 401. Where no token can
// be had, the source reads in the normal mode, without one, as Alibaba's
// credentials libraries do, and asks for a token again a minute later; an
// instance that allows the hardening mode only (403 without a token) gets
// a token request at once. [Config.RequireToken] forbids the normal mode.
//
// # Failures
//
// Nothing the service or the network does makes a notice by itself:
// errors (unreachable, 401, 403, 429, 5xx, no answer within
// [Config.RequestTimeout]) and answers that are not a time with its zone
// (an empty body, an HTML page, "2015-01-05 18:02:00") or a time more
// than an hour past or a day ahead (a placeholder: the zero time, the
// epoch, the year 9999) are retried with backoff up to [Config.MaxBackoff]
// and shown in [termsig.Notifier.Status], in a stable text ("alibaba: HTTP
// 503: Service Unavailable"); an earlier notice is neither sent again nor
// cleared. Redirects are refused, never followed, and answers are cut off
// past 64 KiB of body or head. When the Watch context is done, requests in
// flight are cancelled and Watch returns at once.
//
// # Where it applies
//
// [Source.Available] and Watch return an error wrapping
// termsig.ErrUnavailable, without a network probe, unless the firmware's
// product name is "Alibaba Cloud ECS" (DMI on Linux, the registry's BIOS
// values on Windows) or an endpoint is configured ([Config.Endpoint] or
// the environment variable ALIBABA_METADATA_ENDPOINT, see [EndpointEnv]).
// A Config that cannot work makes both return an error naming the field.
//
// # Testing
//
// Package [github.com/termsig/termsig/alibaba/alibabatest] is a fake
// metadata service on loopback, with tokens, a settable termination time
// and injected faults.
package alibaba

// Package imds watches the EC2 instance metadata service (IMDS) for notices
// that the instance is going away or at risk: spot interruptions, Auto
// Scaling lifecycle changes, rebalance recommendations and scheduled
// maintenance.
//
//	n := termsig.New(imds.New(imds.Config{}))
//	defer n.Stop()
//
// Off EC2 the source retires at once with [termsig.ErrUnavailable], without
// touching the network; [Config.Endpoint] or the
// AWS_EC2_METADATA_SERVICE_ENDPOINT environment variable points it at
// another server, such as the fake in package
// [github.com/termsig/termsig/imds/imdstest].
//
// # Protocol
//
// IMDS has no push or long polling, so [Source] polls, over HTTP below
// /latest/meta-data/, with IMDSv2 session tokens. HTTP and the tokens are
// the AWS SDK's (feature/ec2/imds). A 401 is tried again at once, with the
// fresh token the SDK then fetches; any other failure (429, 5xx, no
// answer) ends the poll, and the source's own backoff between polls
// decides when to ask again: with no second layer of retries, a throttled
// IMDS gets no more requests than the schedule's.
//
// # Cadence
//
// Each path is polled at its own pace, in its own goroutine, so that a
// slow answer on one does not delay the others:
//
//   - spot/instance-action every [Config.Interval] (1 s by default);
//   - events/recommendations/rebalance every [Config.AdvisoryInterval]
//     (3 s);
//   - autoscaling/target-lifecycle-state every AdvisoryInterval while it
//     answers 404 (the instance is in no Auto Scaling group, as most are),
//     and every Interval once it has answered 200;
//   - events/maintenance/scheduled every 30 s: EC2 schedules maintenance
//     days ahead.
//
// While advice holds (a rebalance recommendation, an active scheduled
// event, or a lifecycle state that takes the instance out of service:
// Standby, Detached, Warmed:*, Terminated), the paths polled every
// Interval are polled every 250 ms (the fast mode; or every Interval, if
// that is shorter) instead, from the moment the advice is seen (a path that is failing keeps its backoff),
// until it clears. A rebalance recommendation often comes minutes before an
// interruption, so an interruption that follows one is noticed in 125 ms
// on average rather than 500. Advice can hold for days (an event
// scheduled a week ahead, an instance in Standby or in a warm pool), and
// an error on its path does not clear it: the fast mode lasts as long.
//
// Why 3 s for rebalance recommendations: the fast mode is worth having
// only if it starts before the interruption, and 3 s starts it within
// 3 s of a recommendation (1.5 s on average), ahead of an interruption
// that follows by 5 s or more. It is also what the request budget allows:
// at idle an instance in a group polls 1 + 1 + 1/3 + 1/30 ≈ 2.37 times a
// second; polling rebalance every 2 s would take it to 2.53.
//
// Requests a second, a token every five minutes (0.003 a second)
// included:
//
//	                          idle   under advice
//	in no Auto Scaling group  1.70   4.70
//	in a group                2.37   8.37
//
// Polling the lifecycle state at AdvisoryInterval while it answers 404
// saves 0.67 requests a second on every instance that is in no group
// (3.67 under advice). What it costs
// an instance that is attached to a group after the source started: its
// first lifecycle state is seen up to AdvisoryInterval (3 s) after it
// appears, instead of Interval (1 s) or, under advice, 250 ms; a Terminated that comes first (the group scales the instance
// in the moment it is attached) is that much later. From the first 200
// on, the path is polled every Interval, even if it answers 404 again.
//
// No interval may be below [FloorInterval] (10 ms): faster polling
// would hammer the metadata service. A spot interruption is announced
// about two minutes ahead; polling every second rather than every two or
// five spends little of that.
//
// A 404 means nothing pending; IMDS lists no scheduled events as [], so
// for them a 404 changes nothing.
//
// # Events
//
// Each notice's Event names what it is about, so that a consumer can keep
// one reason per event and drop it when a Cleared notice names it:
// "spot/instance-action", "asg/lifecycle", "rebalance", and
// "scheduled/" followed by the maintenance event's EventId. See
// [Source.Watch] for what each path sends and when.
//
// # First look
//
// The first look of a [Source] needs the network, so it has no Traits
// method and [termsig.New] does not wait for it. Its first look is over
// once every path it watches has had one answer (404 included) or one
// error (a timeout included), and the notices of those answers are on
// Notifier.C: then it calls [termsig.Run.Ready], and
// [termsig.Notifier.Ready] can close. Against an IMDS that does not
// answer, that takes [Config.RequestTimeout] (2 s by default).
//
// # Faults
//
// No error makes a notice: IMDS unreachable, 401, bursts of 429 or 503,
// answers slower than Config.RequestTimeout, truncated JSON, an HTML page
// with status 200, a redirect, an answer that goes on past 1 MiB. The
// source keeps running, backs off (the interval
// doubles per failure up to [Config.MaxBackoff], every wait watching ctx),
// and reports the error with [termsig.Run.Report], so that it shows
// in [termsig.Notifier.Status]; the Notifier logs each change. While several
// paths fail, the error reported is that of the path that has failed
// longest. The error's text is stable (such as "imds: unreachable:
// connection refused" or "imds: no answer within 2s", without URLs), so
// one outage is one log line. A bad answer for scheduled events never
// reads as "the events are gone". When ctx is done, requests in flight
// are cancelled and Watch returns at once, whatever IMDS does.
//
// The source's HTTP client, its own or [Config.HTTPClient], guards what
// the SDK would not:
//
//   - A redirect (3xx) is an error, "imds: redirect refused (HTTP 302)",
//     never followed: the token and the request stay with the endpoint,
//     and another host's answer makes no notice. The SDK does not try it
//     again.
//   - Every answer, the token's included, is cut off past 1 MiB, in the
//     transport, before the SDK (which reads an answer whole) sees it: an
//     answer that never ends costs about 2 MiB of allocations and one
//     error, "imds: answer larger than 1 MiB", and Stop stays prompt while
//     it streams. (A token that is cut off leaves the SDK to go on without
//     one, as IMDSv1, so the error shown is that of the request after it,
//     typically a 401.) A head is cut off past 64 KiB (see
//     [Config.HTTPClient] for a client of the program's own).
//   - With the source's own client, a dial ends with its request, so that
//     a DNS server that does not answer does not hold Stop; on Linux the
//     lookup itself ends too (see [Config.HTTPClient]).
//
// A Config that cannot work (an endpoint that is not an http or https URL,
// a negative duration, an interval below FloorInterval, unknown Events) is
// not a fault to retry: Watch returns an error starting "imds: " at once,
// and the Notifier marks the source failed.
//
// # Systems and host detection
//
// Polling works the same on Linux, macOS and Windows once there is an
// endpoint. Without one (Config.Endpoint or
// AWS_EC2_METADATA_SERVICE_ENDPOINT), the source decides from local facts
// only, without a network probe, whether the host is an EC2 instance: the
// firmware's SMBIOS strings say "Amazon EC2" (Nitro) or Amazon's Xen. They
// are read from DMI (/sys/class/dmi/id, under [Config.Root]) on Linux, and
// from the registry's BIOS values on Windows. macOS shows neither, so on
// an EC2 Mac instance set an endpoint, such as http://169.254.169.254.
// Where the host is not recognised, Watch returns termsig.ErrUnavailable
// at once. See [Source.Available].
//
// # Cost at idle
//
// A process that polls once a second pays mostly for waking up, not for
// the requests. So polls of all paths fall on one grid (the lifecycle
// state and rebalance recommendations go with every third spot poll), and
// the next poll's timer is set before the poll, so that the request's
// timeout never becomes the earliest timer. The HTTP client is net/http's.
// See BENCHMARKS.md for a run beside a plain net/http poller of the same
// paths.
//
// # Figures
//
// Measured on 2 cores (AMD EPYC), Go 1.26.8, linux/amd64, against the fake
// IMDS on loopback:
//
//   - From the fake starting to answer 200 on spot/instance-action to the
//     notice on termsig.Notifier.C, 200 trials spread evenly over the
//     polling cycle: at Interval 1 s (the default) mean 500 ms, p50
//     497 ms, p99 988 ms, max 998 ms; at 100 ms mean 50 ms, p99 99.7 ms;
//     at 2 s (a fixed 2-second poller) mean 1000 ms, p99 1976 ms. The
//     mean is half the interval plus about a millisecond of work.
//   - A spot interruption 5 s or more after a rebalance recommendation, at
//     the defaults (the recommendation at phases spread over the 3 s
//     AdvisoryInterval, the interruption over the 250 ms of the fast mode),
//     200 trials, on 2 cores (Intel Xeon 2.8 GHz): mean 129 ms, p50
//     129 ms, p99 248 ms, max 253 ms.
//   - At idle, at the defaults, in no Auto Scaling group, over one real
//     minute: 104 requests (1.73 a second): 60 spot, 21 lifecycle, 20
//     rebalance, 2 scheduled, 1 token.
//   - One poll cycle of the four paths, on 2 cores (Intel Xeon), through
//     net/http: 150–230 µs wall, 140–160 µs of CPU (the fake's included),
//     58 KB and 822 allocations, mostly the AWS SDK's middleware.
//
// Reproduce them with
//
//	go test -run XXX -bench 'DetectionLatency|AfterRebalance|IdleRequests' -benchtime 1x ./imds
//	go test -run XXX -bench PollCycle ./imds
//
// # Testing
//
// Package imdstest is a fake IMDS on loopback that speaks IMDSv2, can
// schedule every notice above, and injects faults (see
// [github.com/termsig/termsig/imds/imdstest.Server.Inject]); programs use
// it in their own tests too.
package imds

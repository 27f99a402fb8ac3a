// Package gcemeta reports Google Compute Engine preemption and host
// maintenance as a [termsig.Source], by long polling the GCE metadata
// server.
//
//	n := termsig.New(gcemeta.New(gcemeta.Config{}))
//	defer n.Stop()
//
// Off GCE the source retires at once with [termsig.ErrUnavailable],
// without touching the network; [Config.Host] or the GCE_METADATA_HOST
// environment variable points it at another server, such as the fake in
// package [github.com/termsig/termsig/gcemeta/gcemetatest].
//
// # Systems
//
// The source speaks HTTP, so it works on every system once it has a host:
// [Config.Host] or GCE_METADATA_HOST. Without one, it tells GCE from the
// firmware's product name ("Google Compute Engine" or "Google"), read
// where the system shows it: on Linux in /sys/class/dmi/id/product_name,
// on Windows in the registry (SystemProductName under
// HKEY_LOCAL_MACHINE\HARDWARE\DESCRIPTION\System\BIOS), as Google's
// own clients do. Other systems, such as macOS, show it nowhere: there the
// source is unavailable unless a host is given. A program in a container
// that sees the host's root filesystem under another directory, such as
// /host, sets [Config.Root] to it.
//
// # Notices
//
// The source watches three keys below
// http://metadata.google.internal/computeMetadata/v1/:
//
//   - instance/preempted: TRUE is [termsig.Terminate], with a deadline 30 s
//     after it was seen ([PreemptionNotice]): GCE powers a preempted VM off
//     about 30 s after its ACPI soft-off. FALSE is no event.
//   - instance/maintenance-event: TERMINATE_ON_HOST_MAINTENANCE and
//     SHUTDOWN_ON_HOST_MAINTENANCE are [termsig.Terminate], and
//     MIGRATE_ON_HOST_MAINTENANCE is [termsig.Maintenance], each with a
//     deadline 60 s after it was seen ([MaintenanceNotice]); any other
//     upper-case word is [termsig.Maintenance] with the word in the
//     Reason; NONE (or FALSE) after an event is [termsig.Cleared].
//   - instance/upcoming-maintenance?alt=json, where the server has it: a
//     scheduled window is [termsig.Maintenance] with the window's start as
//     the deadline; {} or a COMPLETE status after a window is
//     [termsig.Cleared]. A server without the key (404) is fine: the key
//     is not polled again. A 404 for preempted or maintenance-event, which
//     GCE always has, is a fault and is retried like any other: giving up
//     on them would mean missing a preemption.
//
// Each notice's Event names its key: [EventPreempted] ("preempted"),
// [EventMaintenance] ("maintenance-event") or [EventUpcomingMaintenance]
// ("upcoming-maintenance"); a Cleared notice carries the Event of the
// advice it clears. Each change is reported once; a value that is read
// again (a long poll that timed out, a retry) sends nothing. Notice.Raw
// holds the value as received.
//
// # First look
//
// The source reads the current values first, so that a VM that is already
// preempted when the program starts is reported at once. Once every key
// has had that first read answered or failed (a failure within
// [Config.RequestTimeout], or a 404 for the optional key), and the notices
// it called for have been sent, Watch calls [termsig.Run.Ready], so that
// [termsig.Notifier.Ready] can tell a program when it knows whether the
// VM was already going away. This needs the network, so the Source has no
// Traits method ([termsig.Traits] are zero) and termsig.New does not wait
// for it.
//
// # Long polling
//
// After the first read, each key is read with
// ?wait_for_change=true&last_etag=E&timeout_sec=N: the server answers as
// soon as the value's ETag differs from E, or after N seconds
// ([Config.WaitTimeout], 60 by default). An idle key thus costs one
// request a minute, and a change is seen within a round trip. A request
// that is not answered by N seconds plus [Config.RequestTimeout] is
// abandoned, so that a connection that died silently is noticed.
//
// # Failures
//
// Nothing the server or the network does causes a notice by itself:
//
//   - Errors (a 503 burst, a dropped connection, a timeout, a server that
//     never answers) are retried with jittered exponential backoff (up
//     to [Config.MaxBackoff]) and reported with
//     [termsig.Run.Report], so that they show in
//     [termsig.Notifier.Status] and the Notifier logs them; the source
//     does not log them itself. Their texts are stable (see [Error]), and
//     the key that has failed longest is the one reported, so that an
//     outage is one change however many requests fail. Every answer, for
//     any key, counts as hearing from the server ([termsig.Run.Heard]), so
//     that [termsig.SourceStatus.LastHeard] says when it last answered.
//     After a failure the source reads the key plainly, then long-polls
//     from that answer's ETag, so that a change made meanwhile is seen by
//     the first request that succeeds, even from a server (such as an
//     emulator) that ignores last_etag.
//   - A value that cannot be understood (an empty body, an HTML page, a
//     preempted value other than TRUE or FALSE, JSON that is not the
//     upcoming-maintenance object) is an error, not a notice; the source
//     then waits for the value to change.
//   - An answer that is not the metadata server's is an error, whatever it
//     says: one without the header "Metadata-Flavor: Google", which the
//     server puts on every answer (a captive portal, a proxy, a request
//     that went elsewhere); a redirect (3xx), which is never followed, so
//     that no request goes to the host it names; an answer whose head or
//     body is longer than 64 KiB, cut off there. This holds for a
//     [Config.HTTPClient] too: the source uses it through a copy that
//     refuses redirects and cuts answers off (heads only when its
//     Transport is an *http.Transport or nil: see there).
//   - The source's own client resolves names with Go's resolver, each
//     lookup ending with its request, so that a DNS server that does not
//     answer holds neither Stop nor a goroutine past Watch.
//   - A long poll whose answer changed nothing is followed by the next
//     request for the same key no sooner than [Config.MinInterval] (1 s)
//     after it started, so a server that ignores wait_for_change (it
//     answers at once with the value and ETag it had) costs at most one
//     request per second per key instead of a busy loop. An answer with a
//     new value under a new ETag is followed by the next long poll at
//     once, so that a second change right after the first is not held
//     back; at most one such long poll per MinInterval/10, so a server
//     whose value flips at every answer costs at most ten requests a
//     second per key. After a failure the backoff spaces the requests
//     instead.
//   - When the Watch context is done, requests in flight are cancelled
//     and Watch returns at once, whether the server is hung, slow or gone.
//
// # Configuration errors
//
// A [Config] that cannot work (a negative duration, a MinInterval below
// [FloorInterval], a host that is not a host[:port]) makes
// Watch return at once with an error that starts "gcemeta: " and names the
// field, on every host; a Notifier shows the source as failed.
// [Source.Available] returns the same error.
//
// # Why not metadata.Client.SubscribeWithContext
//
// Google's cloud.google.com/go/compute/metadata package calls back on
// every long-poll answer, changed or not, and after an error sleeps 5 s
// without watching its context; its reads take the host only from the
// environment, retry on their own for up to 15 s and do not return the
// ETag. So the loop here is termsig's own; it follows that package's
// conventions (GCE_METADATA_HOST, the Metadata-Flavor header, a direct
// connection with a 2 s dial timeout) and its error types
// ([Error] wraps metadata.Error and metadata.NotDefinedError).
package gcemeta

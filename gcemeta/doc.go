// Package gcemeta reports Google Compute Engine preemption and host
// maintenance as a [termsig.Source], by long polling the GCE metadata
// server.
//
//	n := termsig.New(gcemeta.New(gcemeta.Config{}))
//	defer n.Stop()
//
// # Notices
//
// The source watches three keys below
// http://metadata.google.internal/computeMetadata/v1/:
//
//   - instance/preempted: TRUE is [termsig.Terminate], with a deadline
//     [PreemptionNotice] (30 s) after it was seen; FALSE is no event.
//   - instance/maintenance-event: TERMINATE_ON_HOST_MAINTENANCE and
//     SHUTDOWN_ON_HOST_MAINTENANCE are [termsig.Terminate] and
//     MIGRATE_ON_HOST_MAINTENANCE is [termsig.Maintenance], each with a
//     deadline [MaintenanceNotice] (60 s) after it was seen; any other
//     upper-case word is Maintenance with the word in the Reason; NONE (or
//     FALSE) after an event is [termsig.Cleared].
//   - instance/upcoming-maintenance?alt=json: a scheduled window is
//     Maintenance with the window's start as the deadline; {} or a
//     COMPLETE status after a window is Cleared. A server without this key
//     (404) is fine: it is not polled again.
//
// Event names the key ([EventPreempted], [EventMaintenance],
// [EventUpcomingMaintenance]), and a Cleared notice carries the Event of
// the advice it clears; Raw holds the value as received. Each change is
// reported once: a value read again sends nothing.
//
// Watch first reads each key's current value, so that a VM already
// preempted at start is reported at once, then calls [termsig.Run.Ready]
// (see [Source.Watch]); termsig.New does not wait for it. Then it
// long-polls each key for up to [Config.WaitTimeout], and abandons a
// request not answered [Config.RequestTimeout] after that.
//
// # Failures
//
// Nothing the server or the network does causes a notice by itself:
//
//   - Errors (a 503, a 404 for preempted or maintenance-event, a dropped
//     connection, a timeout) are retried with jittered backoff up to
//     [Config.MaxBackoff] and shown in [termsig.Notifier.Status] with a
//     stable text (see [Error]); the source does not log them. A change
//     made meanwhile is seen by the first request that succeeds.
//   - A value that cannot be understood (an empty body, an HTML page, a
//     preempted value other than TRUE or FALSE, JSON that is not the
//     upcoming-maintenance object) is an error; the source then waits for
//     the value to change.
//   - An answer without "Metadata-Flavor: Google", a redirect (never
//     followed) and a head or body over 64 KiB are errors, whatever they
//     say, with a [Config.HTTPClient] too.
//   - A server that ignores wait_for_change is asked at most once per
//     [Config.MinInterval] (1 s) per key, never in a busy loop.
//   - When the Watch context is done, requests in flight are cancelled and
//     Watch returns at once, whether the server is hung, slow or gone.
//
// A [Config] that cannot work makes Watch and [Source.Available] return an
// error naming the field, on every host.
//
// # Where it applies
//
// With a host, [Config.Host] or GCE_METADATA_HOST ([HostEnv]), the source
// works on every system. Without one it needs the firmware's product name
// to say "Google Compute Engine" or "Google", as Google's own clients do:
// on Linux in /sys/class/dmi/id/product_name (below [Config.Root]), on
// Windows in the registry (SystemProductName under
// HKEY_LOCAL_MACHINE\HARDWARE\DESCRIPTION\System\BIOS). Off GCE, and on
// systems that show no product name, such as macOS, Watch returns
// [termsig.ErrUnavailable] at once, without touching the network.
//
// # Testing
//
// Package [github.com/termsig/termsig/gcemeta/gcemetatest] is a fake
// metadata server on loopback: point [Config.Host] at it.
package gcemeta

// Package azure reports Azure's Scheduled Events for this VM as termsig
// notices: a spot VM's eviction, its deletion, a redeployment, a reboot, a
// freeze.
//
// Azure announces what it is about to do to a VM in the instance metadata
// service, at http://169.254.169.254/metadata/scheduledevents: a document
// of events, each with its EventId, EventType, the VMs it concerns
// (Resources), its EventStatus (Scheduled, then Started) and NotBefore,
// the time it may start. DESIGN.md describes the protocol and its timings.
//
// # Notices
//
// The source polls the document every [Config.Interval] (1 s) and sends,
// for each event whose Resources name this VM (Config.VMName, or the name
// the metadata service gives; see [This VM's name]):
//
//   - Preempt, Terminate, Redeploy: [termsig.Terminate];
//   - Reboot: [termsig.Reboot];
//   - Freeze: [termsig.Maintenance] (the VM pauses for seconds);
//   - Event: the EventId; Deadline: NotBefore, or, for an event already
//     Started (no NotBefore, or one long past), when it was seen so;
//     Reason: the type, the status and the description; Raw: the event as
//     sent.
//
// An EventId listed twice is its strongest entry; one over 256 bytes is
// reported under a shorter Event. Each EventId is reported once, and again
// only when its EventType or NotBefore changes (a Scheduled event that
// starts: a second notice, with Deadline now). An event that leaves the
// document gives [termsig.Cleared] with its Event. Events for other VMs
// are never notices.
//
// # This VM's name
//
// Unless Config.VMName gives it, the name is read from the metadata
// service. An answer that cannot be an Azure VM's name (at most 64
// letters, digits, '-', '_' and '.') is refused and asked for again. Until
// an event has named it, the name is read again every 10 minutes and
// before a document whose events all name other VMs, and such a document
// shows in Status: the events of an availability set's other VMs, or a
// wrong name.
//
// # Acknowledging: Release
//
// The source is a [termsig.Releaser]: termsig.Notifier.Release with a
// notice acknowledges its event, so that Azure starts it now instead of
// waiting for NotBefore: the VM goes (or reboots) as soon as its work is
// handed back. Release blocks while it retries the request, until it
// succeeds, the event leaves the document, or Release's context ends, so
// give that context a timeout. See [Source.Release] for what it leaves
// alone and what it refuses ([ErrShared]). Stop acknowledges nothing.
//
// # First call
//
// The first call of the scheduled events on a VM enables the service and
// can take up to two minutes: requests wait up to
// [Config.FirstRequestTimeout] (130 s) until the service has answered
// once, and [Config.RequestTimeout] (2 s) after. [termsig.Notifier.Ready]
// therefore can take that long on a fresh VM; termsig.New does not wait.
//
// # Failures
//
// Nothing the service (or something in its place) sends wrong makes a
// notice: an unreachable service, a 400 (the Metadata header missing, a
// proxy in between), 5xx, an answer that is late, endless (cut off past
// 1 MiB of body or 64 KiB of head), truncated, not JSON, or JSON that is
// not a scheduled-events document. Each is retried, with a backoff that
// doubles from Interval up to [Config.MaxBackoff], and shows in
// Notifier.Status. An event of an unknown EventType or EventStatus, or
// without a usable EventId, is not reported (nor cleared, if it was
// reported before) and shows in Status the same way; a document whose
// keys are Azure's in another case ("eventtype"), or twice, is refused. A
// NotBefore that is not a plausible time (more than an hour before the
// event was first seen with it, or more than a week ahead) gives the
// notice without a Deadline, and shows too. Redirects are refused and no
// proxy is used.
//
// # Where it applies
//
// [Source.Available] and Watch return an error wrapping
// termsig.ErrUnavailable, without a network probe, unless the firmware
// has Azure's chassis asset tag (DMI on Linux, SMBIOS through the registry
// on Windows) or an endpoint is configured ([Config.Endpoint] or the
// environment variable AZURE_METADATA_ENDPOINT, see [EndpointEnv]).
//
// # Testing
//
// Package azuretest is a fake metadata service, with settable events,
// the header check, acknowledgements recorded, the enabling delay and
// injected faults.
package azure

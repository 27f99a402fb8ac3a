package termsig

import (
	"context"
	"errors"
)

// ErrUnavailable means that a source cannot work on this host: it is not on
// that cloud, the device is missing, the operating system lacks the feature.
// A [Source] whose Watch returns an error wrapping ErrUnavailable is retired
// quietly by the [Notifier].
var ErrUnavailable = errors.New("termsig: source unavailable on this host")

// A Source watches one origin of termination notices: signals, a metadata
// service, a power button.
//
// Name returns a short, stable, lower-case name such as "imds"; it names the
// source in notices, logs and [SourceStatus].
//
// Watch sends notices to out until ctx is done. Its contract:
//
//   - It blocks until ctx is done, and then returns nil or ctx.Err().
//   - It returns an error wrapping [ErrUnavailable] when it cannot work on
//     this host. It should find that out quickly and without a network
//     probe where the host is clearly not the right kind.
//   - It returns any other error only when it can never work again (a fatal
//     error, such as a configuration that cannot work). Transient failures
//     are retried inside Watch, with backoff whose waits also watch ctx;
//     [ReportError] makes them visible in [Notifier.Status] meanwhile, and
//     the Notifier logs each change, so a source does not log its own
//     health.
//   - Every send on out is a select that also watches ctx.Done(), so that a
//     slow consumer delays the source but never keeps it from returning.
//   - It sends nothing after it returns, and leaves no goroutine behind.
//   - It reports one event once: a notice that is seen again on every poll
//     is not sent again. [Notice.Event] names the event.
//
// A Notifier recovers a panic in Watch (the source then counts as failed),
// but a source must not rely on that.
//
// A Source may be watched by one Notifier at a time unless its
// documentation says otherwise.
type Source interface {
	Name() string
	Watch(ctx context.Context, out chan<- Notice) error
}

// A ReadyReporter is a [Source] whose Watch calls [Ready] once it has had
// its first look at its origin: its signal handlers installed, its
// subscription open, or a first answer (or a first error) from its
// metadata service. [Notifier.Ready] is closed once every ReadyReporter has
// called Ready or returned; a Source that is not a ReadyReporter counts as
// ready as soon as it starts.
//
// ReportsReady says whether that first look is quick and local (a signal
// handler, a socket): if it returns true, [Config.New] waits for Ready
// before it returns (at most [Config.ReadyTimeout]), so that an event right
// after New, such as systemd's SIGTERM a moment after start, is not missed.
// A source whose first look needs the network returns false, so that New
// never waits on the network.
type ReadyReporter interface {
	Source
	ReportsReady() (local bool)
}

// A LocalSource is a [Source] whose notices concern only this process
// (signals sent to it), not the host or the platform. The Notifier logs at
// level Error when the last source that is not a LocalSource ends before
// Stop: from then on no platform notice (a spot interruption, a
// preemption, a power-button press) can reach the program. OnlyLocal is a
// marker: it does nothing.
type LocalSource interface {
	Source
	OnlyLocal()
}

// ReportError tells the Notifier that runs the source watching under ctx
// that the source has a transient failure that it is retrying, such as an
// unreachable metadata service; nil means the same as [ReportHealthy]. It
// shows in [Notifier.Status]; the Notifier logs each change (not each
// call), so a source may call it after every attempt. An error's text
// should be stable (no request ids, no URLs that differ by request), since
// a new text is a change.
//
// Outside a Notifier's Watch context ReportError does nothing.
func ReportError(ctx context.Context, err error) {
	if r, ok := ctx.Value(runKey{}).(*run); ok {
		r.report(err)
	}
}

// ReportHealthy tells the Notifier that the source watching under ctx works
// again after a failure it reported with [ReportError], and that it has
// just heard from its origin (see [Heard]).
func ReportHealthy(ctx context.Context) { ReportError(ctx, nil) }

// Heard tells the Notifier that the source watching under ctx has just
// heard from its origin (a metadata service answered), without saying
// anything about its health: [SourceStatus.LastHeard] shows it. A source
// that watches several things (paths, keys) calls it for each answer while
// another may still be failing.
func Heard(ctx context.Context) {
	if r, ok := ctx.Value(runKey{}).(*run); ok {
		r.heardNow()
	}
}

// Ready tells the Notifier that runs the source watching under ctx that
// the source has had its first look at its origin (see [ReadyReporter]).
// The notices the source sent before Ready are on [Notifier.C] by the time
// [Notifier.Ready] is closed, so Ready waits, as a send does, while the
// consumer is slow; it returns early if ctx is done. Calling it more than
// once, or outside a Notifier's Watch context, does nothing.
func Ready(ctx context.Context) {
	if r, ok := ctx.Value(runKey{}).(*run); ok {
		r.requestReady(ctx)
	}
}

type runKey struct{}

// A Releaser is a [Source] that can let the platform go ahead at once
// when the consumer is done with a notice, instead of waiting for a time
// that was set aside for it: logind closes its delay lock, so that the
// shutdown proceeds instead of waiting out InhibitDelayMaxSec; a source
// of scheduled events may acknowledge the event, so that it starts now
// instead of at its appointed time. Release means "the consumer is done
// with n: the platform may proceed now"; call it only when that is true.
//
// Release of a notice for which the source holds nothing (its event is
// over or cancelled, it was released already, a Cleared notice) does
// nothing and returns nil; it never lets go of what is held for another
// event. It is safe for concurrent use, also with Watch and after Watch
// has returned. Whether Stop releases is the source's to say and
// document: logind's lock is closed when Watch returns (and when the
// process exits), while an acknowledgement is never sent by Stop.
//
// Use it through [Notifier.Release], which finds the notice's source.
type Releaser interface {
	Source
	Release(ctx context.Context, n Notice) error
}

// ErrUnknownSource is returned by [Notifier.Release] for a notice whose
// Source names no source of that Notifier.
var ErrUnknownSource = errors.New("termsig: no such source")

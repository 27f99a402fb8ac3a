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
// source in notices, logs and [SourceStatus], and no two sources of one
// Notifier have the same name.
//
// Watch watches until ctx is done, and talks back to the Notifier through r
// (see [Run]): it sends notices with [Run.Send], says once that it has had
// its first look at its origin with [Run.Ready], and reports its health
// with [Run.Report] and [Run.Heard]. Its contract:
//
//   - It calls r.Ready once it has had its first look: its signal handlers
//     installed, its subscription open, a first answer (or a first error)
//     from its metadata service, and the notices that look called for
//     sent. [Notifier.Ready] waits for every source to do so or return.
//   - It blocks until ctx is done, and then returns nil or ctx.Err().
//   - It returns an error wrapping [ErrUnavailable] when it cannot work on
//     this host. It should find that out quickly and without a network
//     probe where the host is clearly not the right kind.
//   - It returns any other error only when it can never work again (a
//     configuration that cannot work). Transient failures are retried
//     inside Watch, with backoff whose waits also watch ctx; [Run.Report]
//     makes them visible in [Notifier.Status] meanwhile, and the Notifier
//     logs each change, so a source does not log its own health.
//   - It reports one event once: a notice that is seen again on every poll
//     is not sent again. [Notice.Event] names the event. A held notice
//     ([Notice.Held]) is sent again, for the same Event, each time its
//     Deadline moves, and once more, not Held, if the hold ends before
//     Release.
//   - It sends nothing after it returns, and leaves no goroutine behind.
//
// [termsigtest.TestSource] checks a Source against this contract.
//
// A Notifier recovers a panic in Watch (the source then counts as failed),
// but a source must not rely on that. A Source may be watched by one
// Notifier at a time unless its documentation says otherwise.
//
// A Source may have more methods, each the method of an interface of its
// own that the Notifier and package sources look for:
//
//   - Traits() [Traits] ([Describer]): whether its notices concern only this
//     process, and whether its first look is quick and local;
//   - Available() error ([Detector]): whether it applies on this host, from
//     local facts alone;
//   - Release(ctx, Notice) error ([Releaser]): let the platform go ahead
//     once the consumer is done with a notice.
//
// [termsigtest.TestSource]: https://pkg.go.dev/github.com/termsig/termsig/termsigtest#TestSource
type Source interface {
	Name() string
	Watch(ctx context.Context, r *Run) error
}

// Traits tell a [Notifier] how to treat a source. A source without a Traits
// method has the zero Traits: its notices concern the host or the platform,
// and its first look may need the network.
type Traits struct {
	// Local means that the source's notices concern only this process
	// (signals sent to it), not the host or the platform. The Notifier
	// logs at level Error when the last source that is not Local ends
	// before Stop: from then on no platform notice (a spot interruption, a
	// preemption, a power-button press) can reach the program.
	// sources.Config's PlatformOnly leaves such sources out.
	Local bool

	// LocalFirstLook means that the source's first look is quick and
	// local (a signal handler, a socket), so [Config.New] waits for its
	// [Run.Ready] before it returns (at most [Config.ReadyTimeout]), and
	// an event right after New, such as systemd's SIGTERM a moment after
	// start, is not missed. A source whose first look needs the network
	// leaves it false, so that New never waits on the network.
	LocalFirstLook bool
}

// A Describer is a [Source] that says how a [Notifier] should treat it.
type Describer interface {
	Source
	Traits() Traits
}

// A Detector is a [Source] that can tell, from local facts alone (the
// firmware's strings, a socket, an environment variable) and without
// touching the network, whether it applies on this host. Available returns
// nil when it does, an error wrapping [ErrUnavailable] when it does not,
// and another error when its configuration cannot work; its Watch then
// fails at once with the same error. Package sources calls it to choose
// the sources of a host.
type Detector interface {
	Source
	Available() error
}

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
// event. It blocks until the platform has been told or ctx is done, and
// telling it may mean requests retried for as long as ctx allows (azure
// retries its acknowledgement until Azure takes it, or the event leaves
// the document): callers bound ctx, and Release returns promptly once
// ctx is done. Closing a lock (logind) does not block.
//
// Release is safe for concurrent use, also with Watch and after Watch has
// returned. Whether Stop releases is the source's to say and document:
// logind's lock is closed when Watch returns (and when the process exits),
// while an acknowledgement is never sent by Stop.
//
// Use it through [Notifier.Release], which finds the notice's source.
type Releaser interface {
	Source
	Release(ctx context.Context, n Notice) error
}

// ErrUnknownSource is returned by [Notifier.Release] for a notice whose
// Source names no source of that Notifier.
var ErrUnknownSource = errors.New("termsig: no such source")

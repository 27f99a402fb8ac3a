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
//     error). Transient failures are retried inside Watch, with backoff whose
//     waits also watch ctx; [ReportError] makes them visible in
//     [Notifier.Status] meanwhile.
//   - Every send on out is a select that also watches ctx.Done(), so that a
//     slow consumer delays the source but never keeps it from returning.
//   - It sends nothing after it returns, and leaves no goroutine behind.
//   - It reports one event once: a notice that is seen again on every poll
//     is not sent again.
//
// A Source may be watched by one Notifier at a time unless its
// documentation says otherwise.
type Source interface {
	Name() string
	Watch(ctx context.Context, out chan<- Notice) error
}

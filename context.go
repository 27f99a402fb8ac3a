package termsig

import (
	"context"
	"errors"
	"log/slog"
)

// NotifyContext returns a copy of parent that is cancelled when one of the
// sources sends an imminent notice (see [Kind.Imminent]), when the returned
// stop function is called, or when parent is done, whichever happens first.
// The notice is the context's cancel cause: [Cause] returns it.
//
// It is Config{}.NotifyContext(parent, sources...): notices that are not
// imminent are logged to slog.Default().
//
// As with [os/signal.NotifyContext], call stop as soon as the context is no
// longer needed; it releases the sources and returns once they have ended.
func NotifyContext(parent context.Context, sources ...Source) (ctx context.Context, stop context.CancelFunc) {
	return Config{}.NotifyContext(parent, sources...)
}

// NotifyContext is like the function [NotifyContext] but runs the sources
// with c.
//
// Notices that are not imminent (Reload, Rebalance, Maintenance, Cleared) do
// not cancel the context. They are not lost silently: each is logged at
// level Info to c.Logger, or to slog.Default() when c.Logger is nil. A
// program that acts on them (finish work on Reload, stop taking work on
// Rebalance) should use a [Notifier] and read [Notifier.C] instead.
//
// The sources are stopped as soon as the context is done: from then on,
// signals regain their default behaviour, so a second interrupt ends the
// program as usual.
func (c Config) NotifyContext(parent context.Context, sources ...Source) (ctx context.Context, stop context.CancelFunc) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	n := c.New(sources...)
	cctx, cancel := context.WithCancelCause(parent)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer n.Stop()
		for {
			select {
			case <-cctx.Done():
				return
			case nt := <-n.C():
				if nt.Kind.Imminent() {
					cancel(&noticeError{nt})
					return
				}
				c.Logger.Info("termsig: notice does not cancel the context", "source", nt.Source, "kind", nt.Kind.String(), "notice", nt.String())
			}
		}
	}()
	return cctx, func() {
		cancel(nil)
		<-ended
	}
}

// Cause returns the notice that cancelled ctx, or a context derived from it,
// when ctx was made by [NotifyContext]; otherwise it returns false.
func Cause(ctx context.Context) (Notice, bool) {
	var ne *noticeError
	if errors.As(context.Cause(ctx), &ne) {
		return ne.n, true
	}
	return Notice{}, false
}

// noticeError carries a Notice as a context's cancel cause.
type noticeError struct{ n Notice }

func (e *noticeError) Error() string { return "termsig: " + e.n.String() }

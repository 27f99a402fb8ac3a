package termsig

import (
	"context"
	"errors"
	"log/slog"
	"sync"
)

// NotifyContext returns a copy of parent that is cancelled when one of the
// sources sends an imminent notice (see [Kind.Imminent]), when the returned
// stop function is called, or when parent is done, whichever happens first.
// The notice is the context's cancel cause: [Cause] returns it.
//
// It is Config{}.NotifyContext(parent, sources...): notices are logged to
// slog.Default().
//
// As with [os/signal.NotifyContext], the sources keep running until stop
// is called, so call stop as soon as the drain is over; it releases the
// sources and returns once they have ended.
func NotifyContext(parent context.Context, sources ...Source) (ctx context.Context, stop context.CancelFunc) {
	return Config{}.NotifyContext(parent, sources...)
}

// NotifyContext is like the function [NotifyContext] but runs the sources
// with c.
//
// Notices that are not imminent (Reload, Rebalance, Maintenance, Cleared) do
// not cancel the context. They are not lost silently: each is logged at
// level Info to c.Logger (slog.Default() when nil). A program that acts on
// them (finish work on Reload, stop taking work on Rebalance) should use a
// [Notifier] and read [Notifier.C] instead.
//
// The sources, signal handlers included, keep running after the context is
// cancelled, until stop is called: a second notice during the drain (on
// GCE the power button comes first and systemd's SIGTERM a moment later)
// is logged, imminent ones at level Warn with their deadline, and never
// ends the process by the signal's default action. A program that wants a
// second Ctrl-C to end it at once uses a Notifier.
//
// stop cancels the context and stops the sources. It waits for them at
// most c.StopTimeout (default 5 s): a source still running then is logged
// at level Error by name, and stop returns. stop may be called more than
// once.
func (c Config) NotifyContext(parent context.Context, sources ...Source) (ctx context.Context, stop context.CancelFunc) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	timeout := c.StopTimeout
	if timeout < 1 {
		timeout = DefaultStopTimeout
	}
	n := c.New(sources...)
	cctx, cancel := context.WithCancelCause(parent)
	quit := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		var cause *Notice // the notice that cancelled cctx
		for {
			select {
			case <-quit:
				return
			case nt, ok := <-n.C():
				if !ok {
					return
				}
				switch {
				case nt.Kind.Imminent() && cause == nil && cctx.Err() == nil:
					cause = &nt
					cancel(&noticeError{nt})
				case nt.Kind.Imminent():
					c.Logger.Warn("termsig: another imminent notice while draining", "notice", nt, "deadline", nt.Deadline)
				default:
					c.Logger.Info("termsig: notice does not cancel the context", "notice", nt)
				}
			}
		}
	}()
	var once sync.Once
	return cctx, func() {
		cancel(nil)
		once.Do(func() {
			close(quit)
			<-ended
			sctx, cancelStop := context.WithTimeout(context.Background(), timeout)
			defer cancelStop()
			var se *ShutdownError
			if err := n.Shutdown(sctx); errors.As(err, &se) {
				c.Logger.Error("termsig: stop gave up waiting for sources", "sources", se.Running, "waited", timeout)
			}
		})
	}
}

// Cause returns the notice that cancelled ctx, or a context derived from it,
// when ctx was made by [NotifyContext]; and for a context made by
// [Notice.DrainContext], or derived from one, the notice it drains for,
// whether or not it has ended. Otherwise it returns false.
func Cause(ctx context.Context) (Notice, bool) {
	var ne *noticeError
	if errors.As(context.Cause(ctx), &ne) {
		return ne.n, true
	}
	if n, ok := ctx.Value(drainKey{}).(Notice); ok {
		return n, true
	}
	return Notice{}, false
}

// noticeError carries a Notice as a context's cancel cause.
type noticeError struct{ n Notice }

func (e *noticeError) Error() string { return "termsig: " + e.n.String() }

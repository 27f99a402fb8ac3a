package httpguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"time"
)

// Stable returns err, the failure of a request made under rctx (derived
// from ctx, with a timeout), with a text that does not change from request
// to request, so that one fault is one change of a source's health: a
// request timeout says so ("no answer within 2s"), and a network error is
// described without the URL (which may carry a query that changes) or the
// addresses (the local port differs on each connection). If ctx itself
// is done, it returns ctx.Err().
func Stable(ctx, rctx context.Context, err error, timeout time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v: %w", timeout, context.DeadlineExceeded)
	}
	var ge *Error // a redirect or an answer too long: stable already
	if errors.As(err, &ge) {
		return ge
	}
	return &netError{text: describe(err), err: err}
}

// A netError is a network error with a stable text.
type netError struct {
	text string
	err  error
}

func (e *netError) Error() string { return e.text }
func (e *netError) Unwrap() error { return e.err }

// describe returns a stable text for a network error: "unreachable: ..."
// when no connection could be made, "connection lost: ..." when one broke,
// "connection closed without an answer" when the server hung up.
func describe(err error) string {
	var (
		dns *net.DNSError
		op  *net.OpError
		ue  *url.Error
	)
	switch {
	case errors.As(err, &dns):
		return "unreachable: cannot resolve " + dns.Name + ": " + dns.Err
	case errors.As(err, &op):
		what := "connection lost: "
		if op.Op == "dial" {
			what = "unreachable: "
		}
		var se *os.SyscallError
		if errors.As(op.Err, &se) {
			return what + se.Err.Error()
		}
		return what + op.Err.Error()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed without an answer"
	case errors.As(err, &ue):
		return ue.Err.Error()
	}
	return err.Error()
}

// Snippet returns the start of an error page, for error messages.
func Snippet(b []byte) string {
	const n = 100
	s := string(b)
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

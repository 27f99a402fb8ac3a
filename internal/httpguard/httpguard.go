// Package httpguard is what the HTTP clients of the metadata sources (imds,
// gcemeta and azure) share to stay safe against a server that is
// not the metadata service, or a metadata service that misbehaves:
//
//   - a [Transport] refuses redirects, so that a request (and its token)
//     never goes to a host that an answer names, and caps every body, so
//     that an answer that never ends costs a bounded amount of memory,
//     whoever reads it (the AWS SDK reads each answer whole before its
//     caller sees it);
//   - heads are capped at 64 KiB (net/http's default is 10 MiB, and a
//     head of tiny lines costs it many times its size in memory): by
//     [NewTransport], and by [Guard] for a caller's [http.Transport];
//   - [NewTransport] makes a source's own [http.Transport], whose dials
//     (and, on Linux, DNS lookups) end with their request, so that neither
//     holds Stop nor outlives Watch.
//
// Errors are [*Error], with short texts that do not change from request to
// request (no URL, no address), so that one fault is one line in a log.
package httpguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// The kinds of [Error].
var (
	// ErrRedirect: the server answered with a redirect (3xx).
	ErrRedirect = errors.New("redirect refused")
	// ErrTooLarge: the body went on past the Transport's limit.
	ErrTooLarge = errors.New("answer too large")
)

// An Error is an answer that a [Transport] refused. Its text is short and
// stable, such as "redirect refused (HTTP 302)" or "answer larger than 1
// MiB"; Unwrap returns [ErrRedirect] or [ErrTooLarge].
type Error struct {
	kind error
	text string
}

func (e *Error) Error() string { return e.text }

// Unwrap returns ErrRedirect or ErrTooLarge.
func (e *Error) Unwrap() error { return e.kind }

// A Transport is an [http.RoundTripper] that refuses redirects and caps
// bodies, around Base:
//
//   - an answer with a 3xx status is closed unread and RoundTrip returns an
//     [*Error] wrapping [ErrRedirect], so an [http.Client] never follows
//     it, whatever its CheckRedirect;
//   - a body that goes on past MaxBody bytes fails the read that goes past
//     (or the first read, if its Content-Length says so) with an [*Error]
//     wrapping [ErrTooLarge]: a reader never gets more than MaxBody bytes.
//
// It also hands the request's context to the dials of a transport made by
// [NewTransport] (see there). Its zero value is not usable: MaxBody must be
// positive.
type Transport struct {
	Base    http.RoundTripper // nil means http.DefaultTransport
	MaxBody int64
}

// RoundTrip sends req through Base and guards the answer.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.MaxBody <= 0 {
		panic("termsig: httpguard: Transport.MaxBody must be positive")
	}
	ctx := req.Context()
	res, err := t.base().RoundTrip(req.WithContext(context.WithValue(ctx, requestKey{}, ctx)))
	if err != nil {
		return nil, err
	}
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		res.Body.Close()
		return nil, &Error{kind: ErrRedirect, text: fmt.Sprintf("%v (HTTP %d)", ErrRedirect, res.StatusCode)}
	}
	body := &cappedBody{rc: res.Body, left: t.MaxBody, limit: t.MaxBody}
	if res.ContentLength > t.MaxBody && req.Method != http.MethodHead {
		body.err = tooLarge(t.MaxBody)
	}
	res.Body = body
	return res, nil
}

// CloseIdleConnections closes the idle connections of Base, so that
// [http.Client.CloseIdleConnections] reaches them through the Transport.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

// Guard returns a copy of c whose transport is c's own in a [Transport]
// with maxBody: what c does otherwise (its Timeout, its Jar) stays; its
// CheckRedirect never sees a redirect. c itself is not changed.
//
// Heads are capped too. When c's transport is an [*http.Transport] (nil
// means [http.DefaultTransport]) that allows heads longer than 64 KiB
// (its MaxResponseHeaderBytes is zero, which means net/http's 10 MiB, or
// larger), the copy sends through a clone of it that allows 64 KiB, with
// connections of its own: the caller must call release when done with
// the copy, to close them. Any other transport is used as it is, and caps
// heads only if it does so itself. release does nothing when no clone was
// made; it is safe to call more than once.
func Guard(c *http.Client, maxBody int64) (g *http.Client, release func()) {
	base, release := capHeads(c.Transport)
	g = new(http.Client)
	*g = *c
	g.Transport = &Transport{Base: base, MaxBody: maxBody}
	return g, release
}

// capHeads returns rt, or a clone of it whose heads are capped, with the
// function that closes the clone's idle connections.
func capHeads(rt http.RoundTripper) (http.RoundTripper, func()) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	tr, ok := rt.(*http.Transport)
	if !ok || (tr.MaxResponseHeaderBytes > 0 && tr.MaxResponseHeaderBytes <= maxHead) {
		return rt, func() {}
	}
	clone := tr.Clone()
	clone.MaxResponseHeaderBytes = maxHead
	return clone, clone.CloseIdleConnections
}

func tooLarge(limit int64) error {
	return &Error{kind: ErrTooLarge, text: "answer larger than " + size(limit)}
}

// size writes n bytes as people do: "1 MiB", "64 KiB", "100 bytes".
func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// A cappedBody reads rc up to left more bytes, and fails the read that
// would go past them.
type cappedBody struct {
	rc          io.ReadCloser
	left, limit int64
	err         error // once set, every read returns it
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left {
		// One byte more than is left tells a body that ends at the
		// limit from one that goes on.
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		n = int(b.left)
		b.left = 0
		b.err = tooLarge(b.limit)
		return n, b.err
	}
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

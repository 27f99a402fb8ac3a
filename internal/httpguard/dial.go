package httpguard

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"time"
)

// A DialFunc dials a network address, as [net.Dialer.DialContext] does.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// requestKey is the context key under which a Transport hands the context
// of a request to the dials it causes.
type requestKey struct{}

// NewTransport returns the transport of a source's own client: direct
// (never through a proxy: metadata servers are link-local), keeping up to
// maxIdle idle connections per host for the next poll, with dialTimeout to
// connect, DNS lookup included, and answer heads of at most 64 KiB.
//
// Its dials end with their request when the transport is the Base of a
// [Transport], so that Stop is not held by a dial: left to itself,
// net/http lets a dial go on after its request is cancelled, for a later
// request to use.
//
// On Linux, lookups use Go's own resolver (which reads the same
// resolv.conf as libc, and is what runs there anyway unless cgo is in and
// nsswitch.conf asks for more), with a Resolver for each dial, so that no
// lookup is shared, whose queries go through connections that are closed
// when the lookup ends: no lookup outlives the Watch that caused it, even
// when its DNS server never answers. dnsDial dials the DNS server for
// those lookups; nil means a [net.Dialer]. Tests point it at a server of
// their own.
//
// Elsewhere (macOS, Windows) lookups go to the system's resolver, which
// knows the system's split DNS (VPNs, /etc/resolver, NRPT) and which Go's
// resolver would bypass, and dnsDial is not used. The dial still returns
// as soon as its request ends (package net stops waiting for a lookup
// when its context is done); only net's own call into the system
// resolver goes on until the system gives up on it, and its answer is
// dropped.
func NewTransport(dialTimeout time.Duration, maxIdle int, dnsDial DialFunc) *http.Transport {
	d := &dialer{timeout: dialTimeout, dnsDial: dnsDial}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            d.dial,
		MaxIdleConnsPerHost:    maxIdle,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: maxHead,
	}
}

// maxHead bounds the head of an answer, status line and header lines:
// the body cap of a [Transport] does not see heads. net/http's default is
// 10 MiB, and it keeps every header line, so that 10 MiB of tiny lines
// cost it about 180 MiB of allocations. A metadata service's heads are a
// few hundred bytes.
const maxHead = 64 << 10

// preferGo: Go's own resolver, whose lookups end with their context (see
// NewTransport).
const preferGo = runtime.GOOS == "linux"

type dialer struct {
	timeout time.Duration
	dnsDial DialFunc
}

// dial connects to address for the request whose context a Transport put
// in ctx, and gives up when that request ends.
func (d *dialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	if req, ok := ctx.Value(requestKey{}).(context.Context); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(req, cancel)()
	}
	nd := net.Dialer{
		Timeout:   d.timeout,
		KeepAlive: 30 * time.Second,
		Resolver:  &net.Resolver{PreferGo: preferGo, Dial: d.dialDNS},
	}
	return nd.DialContext(ctx, network, address)
}

// dialDNS dials the DNS server for a lookup. Go's resolver gives its
// queries a deadline only, so the connection is closed when the lookup's
// context ends: the query waiting on it then ends at once.
func (d *dialer) dialDNS(ctx context.Context, network, address string) (net.Conn, error) {
	dial := d.dnsDial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	c, err := dial(ctx, network, address)
	if err != nil {
		return nil, err
	}
	// c goes back as it is, not wrapped: the resolver tells UDP from TCP
	// by whether it is a net.PacketConn. It closes c itself too; a second
	// Close does nothing.
	context.AfterFunc(ctx, func() { c.Close() })
	return c, nil
}

package fakefault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// A Host is the network side of a fake metadata service: an HTTP server on
// a loopback port that can go away (Stop: it stops listening and drops
// every connection) and come back on the same address (Start), and that
// counts the requests it answers so that tests can wait for them without
// sleeping. The fakes (imdstest, azuretest) keep their protocol; the Host
// keeps the sockets. Its methods are safe for concurrent use.
type Host struct {
	name string // the fake's package, for errors
	addr string
	srv  *http.Server

	mu       sync.Mutex
	ln       net.Listener
	serving  chan struct{} // closed when the current Serve returns
	conns    map[net.Conn]struct{}
	closed   bool
	gone     chan struct{} // closed and replaced by Stop
	counts   map[string]int
	total    int
	inFlight int
	served   chan struct{} // closed and replaced when a request arrives or is answered
}

// NewHost listens on 127.0.0.1 and returns the Host; Serve starts
// answering. (Two steps, so that the fake has the Host in hand before its
// handler runs.) It panics if it cannot listen, as httptest.NewServer
// does; name prefixes the message.
func NewHost(name string) *Host {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(name + ": listen: " + err.Error())
	}
	o := &Host{
		name:   name,
		addr:   ln.Addr().String(),
		conns:  map[net.Conn]struct{}{},
		gone:   make(chan struct{}),
		counts: map[string]int{},
		served: make(chan struct{}),
	}
	o.ln = ln
	return o
}

// Serve starts answering with h, once.
func (o *Host) Serve(h http.Handler) {
	o.srv = &http.Server{Handler: h, ConnState: o.connState, ReadTimeout: 10 * time.Second}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.serve(o.ln)
}

// URL returns "http://" and the address.
func (o *Host) URL() string { return "http://" + o.addr }

func (o *Host) serve(ln net.Listener) {
	o.ln = ln
	done := make(chan struct{})
	o.serving = done
	go func() {
		defer close(done)
		_ = o.srv.Serve(ln) // ends when ln is closed
	}()
}

func (o *Host) connState(c net.Conn, st http.ConnState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch st {
	case http.StateNew:
		o.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(o.conns, c)
	}
}

// Gone returns the channel that the next Stop closes: requests that a
// fault holds hang up then (see [Effects.Apply]).
func (o *Host) Gone() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gone
}

// Stop stops listening and closes every open connection, so that clients
// see connection refused or reset. Stop on a stopped Host does nothing.
func (o *Host) Stop() {
	o.mu.Lock()
	ln, done := o.ln, o.serving
	o.ln = nil
	if ln != nil {
		close(o.gone)
		o.gone = make(chan struct{})
		for c := range o.conns {
			c.Close()
		}
	}
	o.mu.Unlock()
	if ln != nil {
		ln.Close()
		<-done
	}
}

// Start listens again on the address after Stop. It is an error if the
// address cannot be had again, or if the Host was closed.
func (o *Host) Start() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return errors.New(o.name + ": server closed")
	}
	if o.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("%s: listen again on %s: %w", o.name, o.addr, err)
	}
	o.serve(ln)
	return nil
}

// Close stops the Host for good; Start fails after it. It is safe to call
// more than once.
func (o *Host) Close() {
	o.Stop()
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.srv.Close()
}

// Arrive counts a request that has arrived; the handler calls it first.
func (o *Host) Arrive() {
	o.mu.Lock()
	o.inFlight++
	o.changedLocked()
	o.mu.Unlock()
}

// Answered counts a request under key as answered (or hung up on); the
// handler defers it.
func (o *Host) Answered(key string) {
	o.mu.Lock()
	o.inFlight--
	o.counts[key]++
	o.total++
	o.changedLocked()
	o.mu.Unlock()
}

func (o *Host) changedLocked() {
	close(o.served)
	o.served = make(chan struct{})
}

// Requests returns how many requests under key were answered; "" means
// all of them.
func (o *Host) Requests(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if key == "" {
		return o.total
	}
	return o.counts[key]
}

// Served returns a channel that is closed when a request next arrives or
// is answered.
func (o *Host) Served() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.served
}

// AwaitRequests waits until at least n requests under key ("" for all)
// have been answered, or ctx is done; then it returns ctx's error.
func (o *Host) AwaitRequests(ctx context.Context, key string, n int) error {
	for {
		served := o.Served()
		if o.Requests(key) >= n {
			return nil
		}
		select {
		case <-served:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// InFlight returns how many requests are being answered now.
func (o *Host) InFlight() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.inFlight
}

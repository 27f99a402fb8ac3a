package httpguard

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// A SyncTransport is an HTTP/1.1 [http.RoundTripper] for a poller that asks
// one plain-http server a small question every second or so: it does each
// request on the caller's goroutine, writing the request and reading the
// answer on a kept-alive connection, with no goroutine of its own. An
// [http.Transport] has two per connection, a reader and a writer, which
// every request wakes in turn; an idle process pays for each wakeup, and
// those hand-offs were a fifth of a polling source's CPU at idle.
//
// The protocol is the standard library's ([http.Request.Write] and
// [http.ReadResponse]); the transport manages connections, and what a
// client must do around those: interim answers (1xx) are read past, and
// the head of an answer, theirs included, may not exceed 1 MiB. One
// connection serves one request at a time; concurrent requests dial more,
// up to maxIdle of which are kept for the next ones. A kept connection
// that has something to read before it is asked anything (bytes no request
// asked for, or its end: servers close idle connections after a while) is
// dropped; a request on a kept connection that fails before its answer is
// sent once more, on a new one. Each request's context bounds its dial,
// its write and its read: a deadline becomes the connection's deadline, a
// cancellation ends a read at once, and no deadline is left on a kept
// connection (a pending deadline is a timer that would wake the process).
// On Linux, it reads and writes the socket with raw system calls (see
// rawConn). Requests for other schemes than http (https) go to an
// http.Transport made by [NewTransport].
//
// Its zero value is not usable: use [NewSyncTransport]. Wrap it in a
// [Transport], as any base transport, for the guards.
type SyncTransport struct {
	dialer  *dialer
	maxIdle int
	other   *http.Transport // for https

	mu   sync.Mutex
	idle []*syncConn // the most recently used last
}

// NewSyncTransport returns a SyncTransport that dials as [NewTransport]'s
// transports do, with dialTimeout and dnsDial, and keeps up to maxIdle
// connections.
func NewSyncTransport(dialTimeout time.Duration, maxIdle int, dnsDial DialFunc) *SyncTransport {
	return &SyncTransport{
		dialer:  &dialer{timeout: dialTimeout, dnsDial: dnsDial},
		maxIdle: maxIdle,
		other:   NewTransport(dialTimeout, maxIdle, dnsDial),
	}
}

// A syncConn is one connection with its buffers.
type syncConn struct {
	addr string
	conn net.Conn
	lr   *limitReader // under br: bounds what a head of an answer reads
	br   *bufio.Reader
	bw   *bufio.Writer
}

// maxHead bounds the head of an answer, 1xx heads included (net/http's
// Transport: 10 MiB by default).
const maxHead = 1 << 20

// A limitReader fails a read once n bytes were read.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("httpguard: answer head too large")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// RoundTrip sends req and returns its answer, whose body must be read to
// its end (then the connection is kept) or closed.
func (t *SyncTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return t.other.RoundTrip(req)
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	ctx := req.Context()
	for again := false; ; again = true {
		var sc *syncConn
		kept := false
		if !again {
			// Again, a new connection: the others kept may be closed too.
			sc, kept = t.take(addr)
		}
		if sc == nil {
			c, err := t.dialer.dial(ctx, "tcp", addr)
			if err != nil {
				closeBody(req)
				return nil, err
			}
			c = newRawConn(c)
			lr := &limitReader{r: c}
			sc = &syncConn{addr: addr, conn: c, lr: lr, br: bufio.NewReader(lr), bw: bufio.NewWriter(c)}
		}
		res, err := t.exchange(ctx, sc, req)
		if err == nil {
			return res, nil
		}
		sc.conn.Close()
		if again || !kept || !resendable(req, err) || ctx.Err() != nil {
			closeBody(req)
			return nil, err
		}
		if req, err = rewind(req); err != nil {
			return nil, err
		}
	}
}

// resendable says whether a request that failed with err on a kept
// connection may be sent again on a new one: the failure is the server
// having closed the connection (anything but a timeout, since nothing of
// the answer was read), and its body can be read again.
func resendable(req *http.Request, err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// rewind returns req with its body to be read again from the start.
func rewind(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	b, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Body = b
	return req, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// exchange writes req on sc and reads the head of its answer.
func (t *SyncTransport) exchange(ctx context.Context, sc *syncConn, req *http.Request) (*http.Response, error) {
	dl, _ := ctx.Deadline()
	if err := sc.conn.SetDeadline(dl); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { sc.conn.SetDeadline(time.Unix(1, 0)) })
	err := req.Write(sc.bw)
	if err == nil {
		err = sc.bw.Flush()
	}
	var res *http.Response
	sc.lr.n = maxHead
	for err == nil {
		res, err = http.ReadResponse(sc.br, req)
		// An interim answer (1xx but 101) is followed by the answer.
		if err != nil || res.StatusCode < 100 || res.StatusCode > 199 || res.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	sc.lr.n = math.MaxInt64
	if err != nil {
		stop()
		return nil, ctxErr(ctx, err)
	}
	keep := !req.Close && !res.Close && res.ProtoAtLeast(1, 1) && res.StatusCode != http.StatusSwitchingProtocols && (res.ContentLength >= 0 || len(res.TransferEncoding) > 0)
	res.Body = &syncBody{body: res.Body, t: t, sc: sc, keep: keep, stop: stop, ctx: ctx}
	return res, nil
}

// ctxErr returns the error of a request's I/O that failed with err: the
// context's error if the context ended, which the connection's deadline
// (the context's, or one in the past set when it was cancelled) may tell
// a moment before the context itself does.
func ctxErr(ctx context.Context, err error) error {
	if ce := ctx.Err(); ce != nil {
		return ce
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// A syncBody gives its connection back, or closes it, once the answer has
// been read to its end, or closed.
type syncBody struct {
	body io.ReadCloser
	t    *SyncTransport
	sc   *syncConn
	keep bool        // the connection may serve another request
	stop func() bool // the request's cancellation
	ctx  context.Context

	mu     sync.Mutex
	done   bool
	closed bool
	err    error // of the read that failed: every later read returns it
}

var errBodyClosed = errors.New("http: read on closed response body")

func (b *syncBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	done, closed, failed := b.done, b.closed, b.err
	b.mu.Unlock()
	switch {
	case closed:
		return 0, errBodyClosed
	case failed != nil:
		return 0, failed
	case done:
		return 0, io.EOF
	}
	// A Close meanwhile closes the connection: this read ends.
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		err = ctxErr(b.ctx, err)
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
		b.finish(false)
	}
	return n, err
}

func (b *syncBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.finish(false)
	return nil
}

// finish gives the connection back if the answer was read to its end, the
// request was not cancelled meanwhile (which leaves the deadline in the
// past) and the server keeps it open; else it closes the connection.
func (b *syncBody) finish(atEOF bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	if !b.stop() || !atEOF || !b.keep || b.sc.conn.SetDeadline(time.Time{}) != nil {
		b.sc.conn.Close()
		return
	}
	b.t.give(b.sc)
}

// take returns a kept connection to addr, the most recently used, or nil.
func (t *SyncTransport) take(addr string) (*syncConn, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.idle) - 1; i >= 0; i-- {
		if sc := t.idle[i]; sc.addr == addr {
			t.idle = append(t.idle[:i], t.idle[i+1:]...)
			if quiet(sc.conn) {
				return sc, true
			}
			sc.conn.Close()
		}
	}
	return nil, false
}

// give keeps sc for the next request, unless the server sent more than
// the answer or enough connections are kept.
func (t *SyncTransport) give(sc *syncConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sc.br.Buffered() > 0 || len(t.idle) >= t.maxIdle {
		sc.conn.Close()
		return
	}
	t.idle = append(t.idle, sc)
}

// CloseIdleConnections closes the kept connections.
func (t *SyncTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, sc := range idle {
		sc.conn.Close()
	}
	t.other.CloseIdleConnections()
}

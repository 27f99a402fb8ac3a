package fakefault

import (
	"bytes"
	"net/http"
	"time"

	"github.com/termsig/termsig/termsigtest"
)

// EndlessBody, as [Effects.BodySize], streams a body that never ends.
const EndlessBody = termsigtest.EndlessBody

// Of returns the effects of f that every fake applies the same way.
func Of(f termsigtest.Fault) Effects {
	return Effects{Hang: f.Hang, Delay: f.Delay, Drop: f.Drop, Status: f.Status, Body: f.Body, BodySize: f.BodySize}
}

// Effects are what a fault does to the request that takes it. [Effects.Apply]
// applies them in the order of the fields; the zero Effects let the request
// through.
type Effects struct {
	Hang   bool          // no answer until the fault is cleared, the server goes, or the client gives up
	Delay  time.Duration // hold the request back this long first
	Drop   bool          // close the connection without an answer
	Status int           // answer with this status, 200 if only Body or BodySize is set
	Body   string        // answer with this body
	// BodySize, if not zero, answers with this many bytes of filler in
	// place of Body, streamed without a Content-Length, or with a body
	// that never ends for EndlessBody: what a client must not read whole.
	BodySize int64
}

// An Outcome is what became of a request after [Effects.Apply].
type Outcome int

const (
	// Handled: the request has been answered or hung up on, or its
	// client has gone; the server is done with it.
	Handled Outcome = iota

	// Released: [Queue.Clear] ended a hang. The server serves the request
	// as if it had taken no fault, without the fault's other effects.
	Released

	// Passed: the effects, a delay at most, leave the answer to the
	// server, after any effects of its own that the fault has.
	Passed
)

// Apply applies e to the request of w and r, and returns what became of
// it. It blocks while e holds the request back: a hang until cleared (from
// [Queue.Take]) is closed, and a hang or a delay until gone is closed, as
// a server's Stop or Close does (then the connection is closed without an
// answer), or until the client gives up.
//
// answer writes the answer of Status and Body, with status 200 if Status is
// 0 and the Body as given, empty included: each fake adds what its
// protocol puts on an answer, such as a status text or an ETag.
func (e Effects) Apply(w http.ResponseWriter, r *http.Request, cleared, gone <-chan struct{}, answer func(w http.ResponseWriter, status int, body string)) Outcome {
	if e.Hang {
		return hold(w, r, cleared, nil, gone)
	}
	if e.Delay > 0 {
		t := time.NewTimer(e.Delay)
		defer t.Stop()
		if hold(w, r, nil, t.C, gone) == Handled {
			return Handled
		}
	}
	switch {
	case e.Drop:
		HangUp(w)
	case e.Status != 0 || e.Body != "" || e.BodySize != 0:
		status := e.Status
		if status == 0 {
			status = http.StatusOK
		}
		if e.BodySize != 0 {
			stream(w, r, status, e.BodySize, gone)
		} else {
			answer(w, status, e.Body)
		}
	default:
		return Passed
	}
	return Handled
}

// stream answers with status and size bytes of filler (without end if size
// is negative), with the headers already set on w but no Content-Length,
// until it is all written or the client gives up. If gone is closed first,
// the connection is closed, so that the client sees the body cut off rather
// than complete. gone is looked at between writes: a write to a client that
// has stopped reading waits until the client hangs up or its connection is
// closed, as the fakes' Stop and Close do.
func stream(w http.ResponseWriter, r *http.Request, status int, size int64, gone <-chan struct{}) {
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	for left := size; size < 0 || left > 0; {
		select {
		case <-r.Context().Done():
			return
		case <-gone:
			HangUp(w)
			return
		default:
		}
		n := int64(len(chunk))
		if size >= 0 {
			n = min(n, left)
		}
		if _, err := w.Write(chunk[:n]); err != nil {
			return
		}
		left -= n
	}
}

// hold holds the request back until cleared is closed (Released) or
// timeout fires (Passed); or until its client gives up or gone is closed
// (Handled, and for gone its connection closed). A nil channel never
// ends it.
func hold(w http.ResponseWriter, r *http.Request, cleared <-chan struct{}, timeout <-chan time.Time, gone <-chan struct{}) Outcome {
	select {
	case <-cleared:
		return Released
	case <-timeout:
		return Passed
	case <-r.Context().Done():
		return Handled
	case <-gone:
		HangUp(w)
		return Handled
	}
}

// HangUp closes the connection of w without writing anything, as a reset
// connection or a dying proxy does. It panics if w cannot be hijacked;
// those of net/http's HTTP/1 server, which the fakes use, can.
func HangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("termsig: fakefault: the ResponseWriter cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	_ = conn.Close()
}

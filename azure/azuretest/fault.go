package azuretest

import (
	"time"

	"github.com/termsig/termsig/internal/fakefault"
)

// A Fault makes the server misbehave the way IMDS and the networks in
// front of it do. A request takes the first injected Fault whose Key
// matches it, before the server looks at the request (its Metadata header
// included), as a throttling front end or a proxy answers in IMDS's place.
// The fault's effects apply in this order: Hang, Delay, Drop, Status and
// Body (or BodySize).
// A Fault with none of them set lets the request through.
//
// Faults that clients of IMDS meet:
//
//	Fault{Count: 40, Status: 503}                          // a burst of 503, acknowledgements included
//	Fault{Key: PathScheduledEvents, Status: 429}           // throttled polls
//	Fault{Key: PathScheduledEvents, Body: "<html>..."}     // a captive portal's page, status 200
//	Fault{Key: PathScheduledEvents, Body: `{"Docum`}       // a truncated document
//	Fault{Key: "POST", Count: 1, Status: 500}              // a lost acknowledgement
//	Fault{Delay: 50 * time.Millisecond}                    // every answer late
//	Fault{Hang: true}                                      // IMDS stops answering
//	Fault{Drop: true, Count: 1}                            // one connection reset
//	Fault{Key: PathScheduledEvents, BodySize: EndlessBody} // a document that never ends
type Fault struct {
	// Key limits the fault to one path, such as [PathScheduledEvents] or
	// [PathVMName] (requests other than POST), or to acknowledgements
	// with "POST" (POST requests, whatever their path); empty means
	// every request.
	Key string

	// Count limits the fault to that many requests, such as a burst of
	// 40 throttled ones; the next request goes on to the next fault that
	// matches, or is served. Zero means every request until
	// [Server.ClearFaults].
	Count int

	// Hang: the request gets no answer until ClearFaults (then it is
	// served normally), until [Server.Stop] or [Server.Close] (then its
	// connection is closed), or until the client gives up.
	Hang bool

	// Delay holds the request back this long, then it goes on to the
	// fault's other effects or is served normally. Stop, Close and the
	// client giving up end it early, as for Hang.
	Delay time.Duration

	// Drop closes the connection without an answer, after Delay, as a
	// reset connection or a dying proxy does.
	Drop bool

	// Status answers with this status code, such as 429 or 503, and
	// Body. An empty Body is the status text for a status other than
	// 200, and an empty answer for 200.
	Status int

	// Body answers with this body, with status 200 unless Status is set:
	// truncated JSON, an HTML page.
	Body string

	// BodySize, if not zero, answers with that many bytes of filler in
	// place of Body (with status 200 unless Status is set), streamed
	// without a Content-Length, such as 100 << 20; [EndlessBody] streams
	// a body that never ends, until the client hangs up, Stop or Close.
	// A client must not read such an answer whole.
	BodySize int64
}

// EndlessBody, as [Fault.BodySize], streams a body that never ends.
const EndlessBody = fakefault.EndlessBody

// Inject adds f to the faults. Faults apply in the order they were
// injected, so that Inject(Fault{Count: 2, Status: 503}) then
// Inject(Fault{Count: 1, Drop: true}) fails two requests and drops the
// third; each request takes at most one.
func (s *Server) Inject(f Fault) {
	s.faults.Add(f.Key, f.Count, fakefault.Effects{
		Hang: f.Hang, Delay: f.Delay, Drop: f.Drop, Status: f.Status, Body: f.Body, BodySize: f.BodySize,
	})
}

// ClearFaults removes every fault, as IMDS that comes back does: requests
// that hang go on to be served normally (their Metadata header checked),
// and delayed ones keep their delay.
func (s *Server) ClearFaults() { s.faults.Clear() }

package termsigtest

import "time"

// A Fault makes a fake HTTP service misbehave the way metadata services
// and the networks in front of them do. Every HTTP fake of this module
// takes Faults with its Inject method (imdstest, gcemetatest, azuretest):
// a request takes the first injected Fault whose Key matches it, and the
// fault's effects apply in this order: Hang, Delay, Drop, Status and Body
// (or BodySize), then NoLongPoll and Foreign. A Fault with none of them set
// lets the request through. Each fake's documentation says where in its
// handling a fault applies (IMDS: before the token is checked, as a front
// end answers in its place) and what its Keys are.
//
// Faults that clients of metadata services meet:
//
//	termsigtest.Fault{Count: 40, Status: 503}                         // a burst of 503
//	termsigtest.Fault{Key: "spot/instance-action", Body: "<html>..."} // a captive portal's page, status 200
//	termsigtest.Fault{Delay: 50 * time.Millisecond}                   // every answer late
//	termsigtest.Fault{Hang: true}                                     // the service stops answering
//	termsigtest.Fault{Drop: true, Count: 1}                           // one connection reset
//	termsigtest.Fault{BodySize: termsigtest.EndlessBody}              // an answer that never ends
//	termsigtest.Fault{NoLongPoll: true}                               // an emulator that never holds a long poll
//	termsigtest.Fault{Body: "TRUE", Foreign: true}                    // another server (a captive proxy) answers
type Fault struct {
	// Key limits the fault to some requests: a path or key of the fake's
	// protocol, such as "spot/instance-action" or "instance/preempted",
	// or a word that its documentation gives (imdstest's "api/token",
	// azuretest's "POST"). Empty means every request.
	Key string

	// Count limits the fault to that many requests, such as a burst of
	// 40 throttled ones; the next request goes on to the next fault that
	// matches, or is served. Zero means every request until the fake's
	// ClearFaults.
	Count int

	// Hang: the request gets no answer until ClearFaults (then it is
	// served normally), until the fake is stopped or closed (then its
	// connection is closed), or until the client gives up.
	Hang bool

	// Delay holds the request back this long, then it goes on to the
	// fault's other effects or is served normally. Stopping the fake and
	// the client giving up end it early, as for Hang.
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
	// a body that never ends, until the client hangs up or the fake
	// stops. A client must not read such an answer whole.
	BodySize int64

	// NoLongPoll answers a long poll (GCE's wait_for_change) at once, as
	// some emulators do. Fakes of services without long polls ignore it.
	NoLongPoll bool

	// Foreign leaves off the answer the headers that the real service puts
	// on every answer (GCE's "Metadata-Flavor: Google"), as a server that
	// is not the service answers: a captive proxy, a misrouted request.
	// Fakes of services without such headers ignore it.
	Foreign bool
}

// EndlessBody, as [Fault.BodySize], streams a body that never ends.
const EndlessBody int64 = -1

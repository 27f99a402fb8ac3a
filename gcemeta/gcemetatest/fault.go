package gcemetatest

import (
	"net/http"
	"time"

	"github.com/termsig/termsig/internal/fakefault"
)

// A Fault makes the server misbehave the way GCE's metadata server, the
// emulators that stand in for it and the host under migration do. A
// request takes the first injected Fault whose Key matches it, once the
// server has admitted it (Metadata-Flavor and the query checked); the
// fault's effects apply in this order: Hang, Delay, Drop, Status and Body
// (or BodySize), IgnoreWait; NoFlavor applies to whatever answer the
// request gets.
//
// Faults that clients of the metadata server meet:
//
//	Fault{Key: Preempted, Count: 3, Status: 503}     // a few polls fail, then the value comes
//	Fault{Key: Preempted, Body: "<html>...</html>"}  // an HTML error page, status 200
//	Fault{Delay: time.Second}                        // a slow server, long polls included
//	Fault{Drop: true, Count: 1}                      // one connection lost
//	Fault{IgnoreWait: true}                          // an emulator that never holds a long poll
//	Fault{Key: MaintenanceEvent, Hang: true}         // a key that never answers
//	Fault{Body: "TRUE", NoFlavor: true}              // another server (a captive proxy) answers
//	Fault{Key: Preempted, BodySize: EndlessBody}     // an answer that never ends
type Fault struct {
	// Key limits the fault to one key below /computeMetadata/v1/, such
	// as [Preempted]; empty means every key.
	Key string

	// Count is how many requests take the fault before it is gone, such
	// as 3 for a short outage. Zero keeps it until [Server.ClearFaults].
	Count int

	// Hang: the request gets no answer until ClearFaults (then it is
	// served normally, a long poll included), until [Server.Close] (then
	// its connection is closed), or until the client gives up.
	Hang bool

	// Delay holds the request back this long before the fault's other
	// effects, or before it is served normally, including any long-poll
	// wait; Close and the client giving up end it early.
	Delay time.Duration

	// Drop closes the connection without an answer, after Delay, as a
	// dying proxy or a host being migrated does.
	Drop bool

	// Status answers at once with this status code, such as 503, and a
	// short body (Body if set, else the status text). An ETag is sent as
	// on every answer.
	Status int

	// Body answers with this body in place of the value, with status
	// 200 unless Status is set: an HTML error page, a truncated value.
	Body string

	// BodySize, if not zero, answers with that many bytes of filler in
	// place of Body (with status 200 unless Status is set), streamed
	// without a Content-Length; [EndlessBody] streams a body that never
	// ends, until the client hangs up or Close. A client must not read
	// such an answer whole.
	BodySize int64

	// IgnoreWait answers a wait_for_change request at once, as some
	// emulators do.
	IgnoreWait bool

	// NoFlavor leaves the header "Metadata-Flavor: Google", which the
	// metadata server puts on every answer, off the answer, as a server
	// that is not the metadata server (a captive proxy, a misrouted
	// request) answers.
	NoFlavor bool
}

// EndlessBody, as [Fault.BodySize], streams a body that never ends.
const EndlessBody = fakefault.EndlessBody

// fault is a Fault as the server keeps it: what it does, without the Key
// and Count that the queue matches it by.
type fault struct {
	fakefault.Effects
	ignoreWait bool
	noFlavor   bool
}

// Inject adds f to the faults. Faults apply in the order they were
// injected; each request takes at most one.
func (s *Server) Inject(f Fault) {
	s.faults.Add(f.Key, f.Count, fault{
		Effects:    fakefault.Effects{Hang: f.Hang, Delay: f.Delay, Drop: f.Drop, Status: f.Status, Body: f.Body, BodySize: f.BodySize},
		ignoreWait: f.IgnoreWait,
		noFlavor:   f.NoFlavor,
	})
}

// ClearFaults removes every fault. Requests that hang go on to be served
// normally, a wait_for_change request to its long poll; delayed ones keep
// their delay.
func (s *Server) ClearFaults() { s.faults.Clear() }

// faultAnswer returns how a fault's Status and Body answer a request for
// key: as the real server's error pages, with the status text for an
// empty body and an ETag.
func (s *Server) faultAnswer(key string) func(http.ResponseWriter, int, string) {
	return func(w http.ResponseWriter, code int, body string) {
		if body == "" {
			body = http.StatusText(code) + "\n"
		}
		s.reply(w, key, code, body)
	}
}

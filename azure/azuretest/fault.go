package azuretest

import (
	"github.com/termsig/termsig/internal/fakefault"
	"github.com/termsig/termsig/termsigtest"
)

// Inject adds f (see [termsigtest.Fault]) to the faults. A request takes
// the first fault whose Key matches it before the server looks at the
// request (its Metadata header included), as a throttling front end or a
// proxy answers in IMDS's place. Keys are a path, such as
// [PathScheduledEvents] or [PathVMName] (requests other than POST), or
// "POST" for acknowledgements (POST requests, whatever their path).
// NoLongPoll and Foreign do not apply to this service. Faults apply in the
// order they were injected, so that Inject(Fault{Count: 2, Status: 503})
// then Inject(Fault{Count: 1, Drop: true}) fails two requests and drops
// the third; each request takes at most one.
//
//	srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Status: 429})       // throttled polls
//	srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Body: `{"Docum`}) // a truncated document
//	srv.Inject(termsigtest.Fault{Key: "POST", Count: 1, Status: 500})                    // a lost acknowledgement
func (s *Server) Inject(f termsigtest.Fault) {
	s.faults.Add(f.Key, f.Count, fakefault.Of(f))
}

// ClearFaults removes every fault, as IMDS that comes back does: requests
// that hang go on to be served normally (their Metadata header checked),
// and delayed ones keep their delay.
func (s *Server) ClearFaults() { s.faults.Clear() }

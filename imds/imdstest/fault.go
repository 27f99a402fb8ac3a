package imdstest

import (
	"github.com/termsig/termsig/internal/fakefault"
	"github.com/termsig/termsig/termsigtest"
)

// Inject adds f to the faults (see [termsigtest.Fault]). A request takes
// the first injected fault whose Key matches it, before the server looks
// at the request (its token included), as a throttling front end or a
// proxy answers in IMDS's place. Keys are metadata paths, such as
// [PathInstanceAction], and "api/token" for token requests; NoLongPoll
// and Foreign do nothing here. Faults apply in the order they were
// injected, so that Inject(Fault{Count: 2, Status: 503}) then
// Inject(Fault{Count: 1, Drop: true}) fails two requests and drops the
// third; each request takes at most one.
//
// Faults that clients of IMDS meet, besides those of termsigtest.Fault:
//
//	srv.Inject(termsigtest.Fault{Key: imdstest.PathInstanceAction, Status: http.StatusOK})  // an empty answer, status 200
//	srv.Inject(termsigtest.Fault{Key: imdstest.PathScheduled, Status: http.StatusNotFound}) // a 404 where IMDS sends []
//	srv.Inject(termsigtest.Fault{Key: "api/token", BodySize: termsigtest.EndlessBody})      // a token that never ends
func (s *Server) Inject(f termsigtest.Fault) {
	s.faults.Add(f.Key, f.Count, fakefault.Of(f))
}

// ClearFaults removes every fault, as IMDS that comes back does: requests
// that hang go on to be served normally (tokens checked), and delayed ones
// keep their delay.
func (s *Server) ClearFaults() { s.faults.Clear() }

package alibabatest

import (
	"github.com/termsig/termsig/internal/fakefault"
	"github.com/termsig/termsig/termsigtest"
)

// Inject adds f (see [termsigtest.Fault]) to the faults. A request takes
// the first injected fault whose Key matches it, before the server looks
// at the request (its token included), as a throttling front end or a
// proxy answers in the service's place. Keys are metadata paths, such as
// [PathTerminationTime], and [KeyToken] for token requests; NoLongPoll
// and Foreign do nothing here. Faults apply in the order they were
// injected; each request takes at most one.
//
//	srv.Inject(termsigtest.Fault{Key: alibabatest.PathTerminationTime, Status: 429, Count: 5}) // throttled
//	srv.Inject(termsigtest.Fault{Key: alibabatest.PathTerminationTime, Body: "<html>"})        // a proxy's page
//	srv.Inject(termsigtest.Fault{Key: alibabatest.KeyToken, Status: 404})                      // no hardening mode
func (s *Server) Inject(f termsigtest.Fault) {
	s.faults.Add(f.Key, f.Count, fakefault.Of(f))
}

// ClearFaults removes every fault, as a service that comes back does:
// requests that hang go on to be served normally (tokens checked), and
// delayed ones keep their delay.
func (s *Server) ClearFaults() { s.faults.Clear() }

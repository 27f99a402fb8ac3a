package asgtest

import (
	"net/http"

	"github.com/termsig/termsig/internal/fakefault"
	"github.com/termsig/termsig/termsigtest"
)

// Inject adds f (see [termsigtest.Fault]) to the faults. A request takes
// the first fault whose Key matches it before the server looks at the
// request (its signature included), as a throttling front end answers in
// the API's place. Keys are Action names, such as
// "RecordLifecycleActionHeartbeat"; NoLongPoll and Foreign do not apply
// to this service. Faults apply in the order they were injected, and each
// request takes at most one. A faulted request is counted by
// [Server.Requests] but not logged by [Server.Calls].
//
//	srv.Inject(asgtest.ErrorFault("RecordLifecycleActionHeartbeat", "Throttling", 2)) // two throttled heartbeats
//	srv.Inject(termsigtest.Fault{Key: "CompleteLifecycleAction", Count: 1, Drop: true}) // a completion whose answer is lost
func (s *Server) Inject(f termsigtest.Fault) {
	s.faults.Add(f.Key, f.Count, fakefault.Of(f))
}

// ClearFaults removes every fault: requests that hang go on to be served
// normally, and delayed ones keep their delay.
func (s *Server) ClearFaults() { s.faults.Clear() }

// ErrorFault returns a Fault for [Server.Inject] that answers count
// requests of action (0: every one until ClearFaults; "" for every
// action) with the error code as Auto Scaling sends it: an ErrorResponse
// with AWS's status and message for Throttling (400, "Rate exceeded"),
// AccessDenied (403), ResourceContention (500), InternalFailure (500) and
// ServiceUnavailable (503), and status 400 with the code as message for
// any other code. Every request it answers gets the same RequestId.
func ErrorFault(action, code string, count int) termsigtest.Fault {
	e := &apiError{http.StatusBadRequest, code, code}
	switch code {
	case "Throttling":
		e.msg = "Rate exceeded"
	case "AccessDenied":
		e.status, e.msg = http.StatusForbidden, deniedMessage(action, "")
	case "ResourceContention":
		e.status, e.msg = http.StatusInternalServerError, "You already have a pending update to an Auto Scaling resource (for example, a group, instance, or load balancer)."
	case "InternalFailure":
		e.status, e.msg = http.StatusInternalServerError, "An internal error occurred."
	case "ServiceUnavailable":
		e.status, e.msg = http.StatusServiceUnavailable, "Service is unavailable. Please try again later."
	}
	return termsigtest.Fault{Key: action, Count: count, Status: e.status, Body: errorXML(e, newUUID())}
}

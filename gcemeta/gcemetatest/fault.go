package gcemetatest

import (
	"net/http"

	"github.com/termsig/termsig/internal/fakefault"
	"github.com/termsig/termsig/termsigtest"
)

// fault is a termsigtest.Fault as the server keeps it: what it does,
// without the Key and Count that the queue matches it by.
type fault struct {
	fakefault.Effects
	noLongPoll bool
	foreign    bool
}

// Inject adds f (see [termsigtest.Fault]) to the faults. A request takes
// the first fault whose Key matches it once the server has admitted it
// (Metadata-Flavor and the query checked); Keys are the keys below
// /computeMetadata/v1/, such as [Preempted]. A Status answer carries an
// ETag, as the server's error pages do. NoLongPoll answers a
// wait_for_change request at once, as some emulators do; Foreign leaves
// the header "Metadata-Flavor: Google" off whatever answer the request
// gets. Faults apply in the order they were injected; each request takes
// at most one.
//
//	srv.Inject(termsigtest.Fault{Key: gcemetatest.Preempted, Count: 3, Status: 503}) // a few polls fail
//	srv.Inject(termsigtest.Fault{NoLongPoll: true})                                  // an emulator
//	srv.Inject(termsigtest.Fault{Key: gcemetatest.MaintenanceEvent, Hang: true})     // a key that never answers
//	srv.Inject(termsigtest.Fault{Body: "TRUE", Foreign: true})                       // a captive proxy answers
func (s *Server) Inject(f termsigtest.Fault) {
	s.faults.Add(f.Key, f.Count, fault{Effects: fakefault.Of(f), noLongPoll: f.NoLongPoll, foreign: f.Foreign})
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

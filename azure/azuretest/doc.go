// Package azuretest provides a fake Azure Instance Metadata Service (IMDS)
// for Scheduled Events, for tests: a real HTTP server on a loopback port
// that serves the scheduled-events document and takes acknowledgements as
// Azure's does, like [net/http/httptest] does for HTTP. Programs use it in
// their own tests too, to see what their code does with a preemption or a
// reboot:
//
//	srv := azuretest.NewServer()
//	defer srv.Close()
//	srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Preempt", NotBefore: time.Now().Add(30 * time.Second)})
//	// point the client under test at srv.URL in place of http://169.254.169.254
//
// # Protocol
//
// The server answers two paths, requests that carry the header
// "Metadata: true" and an api-version query parameter (any version is
// taken):
//
//   - GET [PathScheduledEvents] answers the document,
//     {"DocumentIncarnation": n, "Events": [...]}, with the events of
//     [Server.SetEvents] as [Event] describes. DocumentIncarnation goes up
//     whenever the events change, and with [Server.BumpIncarnation].
//   - POST [PathScheduledEvents] with {"StartRequests":[{"EventId":"..."}]}
//     acknowledges events: the server records their ids (see
//     [Server.StartRequests] and [Server.WaitStartRequests]), answers 200
//     with no body, and starts the events named (EventStatus "Started",
//     NotBefore ""), unless [Server.SetStartOnAck] turned that off. A body
//     that is not JSON gets 400, one over 64 KiB 413.
//   - GET [PathVMName] answers the VM's name as text ("test-vm", see
//     [Server.SetVMName]), with format=text or no format.
//
// As Azure's, it answers 400 with a JSON error to a request without the
// Metadata header, with an X-Forwarded-For header (a proxied request) or
// without api-version; 404 for another path; 405 for another method. The
// first call of scheduled events on a VM can take up to two minutes, the
// service enabling itself: [Server.SetEnableDelay] makes it so.
//
// # Faults
//
// [Server.Inject] takes a [github.com/termsig/termsig/termsigtest.Fault],
// which makes the server misbehave, for some requests or until
// [Server.ClearFaults], as IMDS and the network in front of it do: answer
// with a status such as 429 or 503, answer with a body IMDS would not send
// (truncated JSON, an HTML page with status 200, a body of 100 MB or one
// that never ends), answer late, never answer, or drop the connection.
// [Server.Stop] and [Server.Start] take the whole service away and bring
// it back, as a broken network path does.
//
// # Waiting without sleeping
//
// [Server.Requests] counts the requests per path, [Server.InFlight] the
// requests being answered now, and [Server.Served] returns a channel that
// is closed when either changes, so that a test can wait for "the source
// has polled twice more" or "a request is hanging" without sleeping.
// [Server.WaitStartRequests] waits for acknowledgements.
//
// # Closing
//
// [Server.Close] releases every request that waits or hangs, closes the
// connections and shuts the server down. All methods are safe for
// concurrent use.
package azuretest

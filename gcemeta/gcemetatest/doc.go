// Package gcemetatest provides a fake GCE metadata server for tests: a real
// HTTP server on a loopback port that speaks the metadata protocol as
// package [github.com/termsig/termsig/gcemeta] and Google's clients use it,
// like [net/http/httptest] does for HTTP.
//
//	srv := gcemetatest.NewServer()
//	defer srv.Close()
//	n := termsig.New(gcemeta.New(gcemeta.Config{Host: srv.Host()}))
//	defer n.Stop()
//	srv.Set(gcemetatest.Preempted, "TRUE") // the VM is preempted
//	// the code under test reads a Terminate from n.C()
//
// Programs that use Google's clients can point them at the fake with the
// GCE_METADATA_HOST environment variable set to [Server.Host].
//
// # Protocol
//
// Values live under /computeMetadata/v1/, such as
// /computeMetadata/v1/instance/preempted. The server:
//
//   - answers 403 to a request without the header "Metadata-Flavor: Google",
//     or with an X-Forwarded-For header, as the real server does;
//   - sends an ETag with every answer, equal for equal values (see [ETag]);
//   - holds a request with ?wait_for_change=true until the value's ETag
//     differs from last_etag (at once if it already does) or timeout_sec
//     seconds pass, then answers with the value of the moment;
//   - answers 404 for a key that does not exist (see [Server.Delete]);
//   - answers / with "computeMetadata/" and the Metadata-Flavor header,
//     which is what Google's client probes to tell that it is on GCE.
//
// # Faults
//
// [Server.Inject] takes a [github.com/termsig/termsig/termsigtest.Fault],
// which makes the server misbehave for some requests or until
// [Server.ClearFaults]: answer with a status such as 503, answer late,
// drop the connection, answer with an HTML page or a body that never
// ends, answer without the Metadata-Flavor header (as another server
// does), ignore wait_for_change, or never answer. [Server.DropWaiting]
// drops the long polls that are waiting now, as a lost connection does.
// [Server.IgnoreLastETag] makes the server ignore last_etag, as some
// emulators do.
//
// # Waiting without sleeping
//
// [Server.Requests] counts requests per key, so that a test can check that
// a client does not spin; [Server.Waiting] counts the long polls waiting
// now. [Server.Await] blocks until a condition on them holds, so that a
// test can wait for "the client is waiting on a long poll" before it
// changes a value, without sleeping.
//
// # Closing
//
// [Server.Close] releases every request that waits or hangs, closes the
// connections and returns once every handler has returned, so that no
// goroutine of the server is left behind.
package gcemetatest

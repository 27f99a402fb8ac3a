// Package tencenttest provides a fake Tencent Cloud CVM metadata service
// for tests: a real HTTP server on a loopback port that speaks the
// protocol as package [github.com/termsig/termsig/tencent] uses it, like
// [net/http/httptest] does for HTTP. Programs use it in their own tests
// too, to see what their code does with a spot instance's reclaim:
//
//	srv := tencenttest.NewServer()
//	defer srv.Close()
//	n := termsig.New(tencent.New(tencent.Config{Endpoint: srv.URL, Interval: tencent.FloorInterval}))
//	defer n.Stop()
//	srv.SetTerminationTime(time.Now().Add(2 * time.Minute))
//	// the code under test reads a Terminate from n.C()
//
// # Protocol
//
// Metadata lives under /latest/meta-data/. The server answers
// spot/termination-time 404 until [Server.SetTerminationTime], then the
// time in China Standard Time (UTC+8) without a zone ("2018-08-18
// 12:05:33"), and instance-id with a fixed id; other paths 404, other
// methods than GET and HEAD 405.
//
// # Faults
//
// [Server.Inject] takes a [github.com/termsig/termsig/termsigtest.Fault],
// the fault type of every HTTP fake of this module: a status such as 429
// or 503, a body the service would not send (an HTML page, one that never
// ends), an answer that is late or never comes, a dropped connection.
// [Server.Stop] and [Server.Start] take the whole service away and bring
// it back.
//
// # Waiting without sleeping
//
// [Server.Requests] counts the requests per path, [Server.InFlight] the
// requests being answered now, and [Server.AwaitRequests] waits for a
// count, so that a test can wait for "the source has polled twice more"
// without sleeping.
//
// # Closing
//
// [Server.Close] releases every request that waits or hangs, closes the
// connections and shuts the server down. All methods are safe for
// concurrent use.
package tencenttest

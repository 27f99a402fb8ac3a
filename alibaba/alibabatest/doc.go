// Package alibabatest provides a fake Alibaba Cloud ECS metadata service
// for tests: a real HTTP server on a loopback port that speaks the
// protocol as package [github.com/termsig/termsig/alibaba] and Alibaba's
// own clients use it, like [net/http/httptest] does for HTTP. Programs use
// it in their own tests too, to see what their code does with a spot
// instance's release:
//
//	srv := alibabatest.NewServer()
//	defer srv.Close()
//	n := termsig.New(alibaba.New(alibaba.Config{Endpoint: srv.URL, Interval: alibaba.FloorInterval}))
//	defer n.Stop()
//	srv.SetTerminationTime(time.Now().Add(5 * time.Minute))
//	// the code under test reads a Terminate from n.C()
//
// # Protocol
//
// Metadata lives under /latest/meta-data/. The server:
//
//   - hands out tokens of the security hardening mode on PUT
//     /latest/api/token with the header
//     X-aliyun-ecs-metadata-token-ttl-seconds (1 to 21600); 400 without a
//     valid TTL, 403 with an X-Forwarded-For header, 405 for another
//     method;
//   - answers a request with an unknown or expired token
//     (X-aliyun-ecs-metadata-token) 401, and one without a token as the
//     normal mode does, or 403 once [Server.SetTokensRequired] allows the
//     hardening mode only;
//   - answers instance/spot/termination-time 404 until
//     [Server.SetTerminationTime], then the time in UTC
//     ("2015-01-05T18:02:00Z"), and instance-id with a fixed id.
//
// # Faults
//
// [Server.Inject] takes a [github.com/termsig/termsig/termsigtest.Fault],
// the fault type of every HTTP fake of this module: a status such as 429
// or 503, a body the service would not send (an HTML page, one that never
// ends), an answer that is late or never comes, a dropped connection.
// [Server.Stop] and [Server.Start] take the whole service away and bring
// it back; [Server.ExpireTokens] forgets the tokens, as a restart does.
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
package alibabatest

// Package imdstest provides a fake EC2 instance metadata service (IMDS) for
// tests: a real HTTP server on a loopback port that speaks IMDSv2 as the
// AWS SDK's feature/ec2/imds and package
// [github.com/termsig/termsig/imds] use it, like [net/http/httptest] does
// for HTTP. Programs use it in their own tests too, to see what their code
// does with a spot interruption:
//
//	srv := imdstest.NewServer()
//	defer srv.Close()
//	n := termsig.New(imds.New(imds.Config{Endpoint: srv.URL, Interval: imds.FloorInterval}))
//	defer n.Stop()
//	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
//	// the code under test reads a Terminate from n.C()
//
// Programs that use the AWS SDK directly can point it at the fake with the
// AWS_EC2_METADATA_SERVICE_ENDPOINT environment variable set to
// [Server.URL].
//
// # Protocol
//
// Metadata lives under /latest/meta-data/, such as
// /latest/meta-data/spot/instance-action. The server:
//
//   - hands out session tokens on PUT /latest/api/token with the header
//     X-aws-ec2-metadata-token-ttl-seconds (1 to 21600); 400 without a
//     valid TTL, 403 with an X-Forwarded-For header, 405 for another
//     method;
//   - answers a metadata request without a token 401 (unless
//     [Server.SetTokensOptional] allows IMDSv1), and one with an unknown
//     or expired token 401, so that a client fetches a fresh one;
//   - answers 404 for a path with nothing pending: spot/instance-action
//     and spot/termination-time until [Server.SetInterruption],
//     events/recommendations/rebalance until [Server.SetRebalance],
//     autoscaling/target-lifecycle-state until [Server.SetLifecycleState];
//   - answers events/maintenance/scheduled with a JSON array, [] when
//     nothing is scheduled (see [Server.SetScheduledEvents]), and
//     instance-id with a fixed id.
//
// # Faults
//
// [Server.Inject] takes a [github.com/termsig/termsig/termsigtest.Fault],
// the fault type of every HTTP fake of this module, and makes the server
// misbehave for some requests or until [Server.ClearFaults], as IMDS and
// the network in front of it do: answer with a status such as 429 or 503,
// answer with a body IMDS would not send (truncated JSON, an HTML page
// with status 200, a body of 100 MB or one that never ends), answer late,
// never answer, or drop the connection. [Server.Stop] and [Server.Start]
// take the whole service away and bring it back, as a broken network path
// does; [Server.ExpireTokens] forgets the tokens, as a restart of IMDS
// does.
//
// # Waiting without sleeping
//
// [Server.Requests] counts the requests per path, [Server.InFlight] the
// requests being answered now, and [Server.Served] returns a channel that
// is closed when either changes, so that a test can wait for "the source
// has polled twice more" or "a request is hanging" without sleeping.
//
// # Closing
//
// [Server.Close] releases every request that waits or hangs, closes the
// connections and shuts the server down. All methods are safe for
// concurrent use.
package imdstest

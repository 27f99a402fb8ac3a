// Package registry is a small stand-in for a CI service: runners register,
// claim queued jobs, run them and report how they ended, all over HTTP/JSON.
// Registering takes a join token; a registration is identified by a secret
// token, given at registration; enqueueing, reading jobs and removing other
// runners take an admin token.
// It exists so that the termsig example runner (examples/runner) can be
// shown draining, re-queuing and unregistering against something real on
// loopback, without a GitHub or GitLab account. It is written to be read and
// copied, not to be deployed.
//
// # Server
//
// [NewServer] returns a [Server], an [net/http.Handler] that keeps its whole
// state (runners, jobs, the next ids) in memory and writes it to a JSON file
// after every change, atomically, so that a restarted registry carries on
// where it stopped and never hands out an id twice:
//
//	srv, err := registry.NewServer("registry.json", &registry.Config{AdminToken: admin, JoinToken: join})
//	if err != nil {
//		return err
//	}
//	http.ListenAndServe("127.0.0.1:8321", srv)
//
// The command in cmd/registry does exactly that, with logging, admin and
// join token files, flags for the [Config] and a clean shutdown on SIGTERM or
// SIGINT.
//
// Each runner has a lease ([Config.Lease]), renewed by its requests; when
// it lapses the registry removes the runner and re-queues its job, so that
// the job of a runner gone for good runs again. [Config] also bounds what
// the registry holds: command and output sizes, jobs, runners.
//
// # Client
//
// [NewClient] returns a [Client] for the API; [Client.WithToken] one that
// presents the join token, a runner's token or the admin token. A non-2xx answer is an
// [*APIError]; errors.Is(err, [ErrNotFound]), errors.Is(err, [ErrConflict])
// and errors.Is(err, [ErrUnauthorized]) pick out 404, 409, and 401 or 403.
// Any other error means the registry could not be reached or answered
// something that is not the API.
//
// # Jobs
//
// A job is a shell command line. It is queued when created, running once a
// runner has claimed it, and ends succeeded or failed when that runner
// reports so. An attempt that is interrupted (reported so by the runner, or
// because the runner was removed or its lease lapsed while it ran it) is
// recorded in the job's
// History and the job goes back to the queue at once, the way a CI service
// re-runs an interrupted workflow; the oldest queued job is claimed first, so
// a re-queued job runs again before newer ones.
package registry

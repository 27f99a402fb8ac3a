// Package ghfake is a fake GitHub for tests of programs that drive GitHub
// Actions self-hosted runners, as [net/http/httptest] is for HTTP: a real
// HTTP server on 127.0.0.1 that speaks the part of GitHub's REST API that
// manages runners, workflow runs and their jobs, with GitHub's JSON shapes,
// and a fake runner (config.sh, run.sh and its listener) that registers
// with it and runs its jobs. A test sees the whole flow of a runner
// supervisor without GitHub:
//
//	gh, err := ghfake.Start(ghfake.Config{Token: "ghp_test"})
//	if err != nil { ... }
//	defer gh.Close()
//	exe, _ := os.Executable()
//	err = ghfake.WriteRunnerDir(dir, exe) // config.sh and run.sh run this test binary
//	run := gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "build"}}})
//
// and the test binary's TestMain hands the runner's processes to [Main]:
//
//	func TestMain(m *testing.M) {
//		if role := os.Getenv(ghfake.RoleEnv); role != "" {
//			os.Exit(ghfake.Main(role, os.Args[1:]))
//		}
//		os.Exit(m.Run())
//	}
//
// # The REST API
//
// [Server.APIURL] is the API's base URL in GitHub Enterprise Server's
// layout (URL + "/api/v3/"), for go-github's Client.BaseURL. Under it,
// with {scope} either repos/{owner}/{repo} or orgs/{org}:
//
//   - POST {scope}/actions/runners/registration-token: a registration
//     token for config.sh, valid for an hour, for that scope only;
//   - GET {scope}/actions/runners (?name=, paginated),
//     GET and DELETE {scope}/actions/runners/{id}: the registrations; a
//     busy runner cannot be deleted (422), as on GitHub;
//   - GET repos/{owner}/{repo}/actions/runs (?status=, newest first),
//     GET .../runs/{id}, GET .../runs/{id}/jobs (?filter=latest|all),
//     GET repos/{owner}/{repo}/actions/jobs/{id};
//   - POST .../runs/{id}/cancel (202; 409 once completed): queued jobs
//     are cancelled at once, running ones once their listener has
//     stopped them;
//   - POST .../runs/{id}/force-cancel (202; 409 once completed): every job
//     that has not completed is cancelled at once, its runner there or
//     not, and the run completes, cancelled (see [Run.ForceCancelled]);
//   - POST .../runs/{id}/rerun-failed-jobs and .../runs/{id}/rerun (201;
//     403 "cannot be retried" while the run is not completed, or for
//     rerun-failed-jobs when nothing failed);
//   - GET orgs/{org}/repos: the organisation's repositories that the
//     server knows (those with runs or pushes), ordered by ?sort=created
//     (the default), updated, pushed or full_name, in ?direction=desc
//     (the default; asc for full_name) or asc. A repository's created_at
//     and pushed_at are when it was first seen; [Server.Push] moves its
//     pushed_at and updated_at, and runs change neither;
//   - GET repos/{owner}/{repo}/check-runs/{id}/annotations: a job's
//     annotations (a job's check run has the job's id).
//
// Every answer carries GitHub's X-RateLimit-* headers; lists are paginated
// with per_page (default 30, at most 100), page and a Link header, as
// GitHub does. Unknown paths get GitHub's 404. A request without the
// configured token gets GitHub's 401.
//
// # Jobs and runners
//
// A queued job goes to an idle runner whose listener is connected, whose
// labels include all of the job's, and whose scope covers the job's
// repository (an organisation's runner takes jobs of any of its
// repositories, a repository's runner only of its own); an ephemeral
// runner takes one job only. A job ends when its [JobSpec.Duration] has
// passed (or [Server.FinishJob] says its steps are done), when its run is
// cancelled or force-cancelled, or when its listener is stopped (SIGINT
// or SIGTERM): the listener then says "Canceled", while GitHub records a
// failure with [ShutdownMessage] unless the run was being cancelled. A
// listener that dies without a word (SIGKILL) leaves its runner offline
// but busy and its job in progress, as on GitHub, until
// [Server.LoseRunner] does what GitHub does some ten minutes later.
//
// # The fake runner
//
// [WriteRunnerDir] writes config.sh, run.sh and run-helper.sh, laid out
// like actions/runner's, that run a test binary in the role [RoleConfig]
// or [RoleListener]. config.sh registers the runner with a registration
// token and writes .runner and .credentials as the real one does; like
// it, it takes an option missing from its command line from the
// environment (ACTIONS_RUNNER_INPUT_TOKEN for --token; see
// [InputEnvPrefix]), warns about options it does not know and goes on,
// and refuses to run while .runner or .runner_migrated is there. run.sh
// runs the listener, which prints what the real one prints ("Listening for
// Jobs", "Running job: NAME", "Job NAME completed with result: RESULT") and
// talks to the server over private endpoints under /_fake/, which take no
// latency or faults and are not recorded as calls. The listener exits 0
// when stopped, 1 on an error a restart would not cure, and 5 when
// another listener holds the runner's session; run-helper.sh says what
// that means as the real one does, and run.sh exits 0 (unless a signal
// kills it), as the real one does, whatever the listener's status.
//
// # Faults
//
// [Server.Inject] makes REST API requests fail: with a status such as 502,
// with one of GitHub's rate limits (which go-github reports as
// *github.RateLimitError or *github.AbuseRateLimitError, or for 429 as an
// *github.ErrorResponse with Retry-After), or by never answering.
// [Config.Latency] delays every REST API request.
//
// # Waiting without sleeping
//
// [Server.Calls] lists the REST API requests received, and the snapshots
// ([Server.Runner], [Server.Run] and the rest) show the state.
// [Server.Changed] returns a channel that is closed at the next change or
// request, and [Server.Await] waits on it for a condition, so that a test
// never sleeps.
//
// # Closing
//
// [Server.Close] releases every request that waits or hangs, ends every
// listener's connection, and returns when none of the server's goroutines
// is left. A listener whose server is gone exits 1 after a few tries. All
// methods of a [Server] are safe for concurrent use.
package ghfake

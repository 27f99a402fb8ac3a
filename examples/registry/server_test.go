package registry_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

// endpointFixture is the state every case of TestEndpoints starts from:
// runner r-1 "busy" runs job j-1, runner r-2 "idle" runs nothing, job j-2 is
// queued.
func endpointFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.register(t, "busy")
	f.register(t, "idle", "linux", "x86")
	f.enqueue(t, "echo one")
	f.enqueue(t, "echo two")
	require.Equal(t, "j-1", f.claim(t, "r-1").ID)
	return f
}

func TestEndpoints(t *testing.T) {
	tests := []struct {
		name         string
		auth         string // "admin", a runner id for its token, "" for none, or a token
		method, path string
		body         string
		status       int
		allow        string                                      // Allow header of a 405
		check        func(t *testing.T, f *fixture, body []byte) // optional
	}{
		// POST /runners
		{name: "register", auth: "join", method: "POST", path: "/runners", body: `{"name":"new","labels":["gpu"]}`, status: 201,
			check: func(t *testing.T, f *fixture, b []byte) {
				r := decodeJSON[registry.Runner](t, b)
				assert.Equal(t, "r-3", r.ID)
				assert.Equal(t, "new", r.Name)
				assert.Equal(t, []string{"gpu"}, r.Labels)
				assert.False(t, r.RegisteredAt.IsZero())
				assert.Empty(t, r.JobID)
			}},
		{name: "register without labels", auth: "join", method: "POST", path: "/runners", body: `{"name":"new"}`, status: 201,
			check: func(t *testing.T, f *fixture, b []byte) { assert.Contains(t, string(b), `"labels":[]`) }},
		{name: "register null labels", auth: "join", method: "POST", path: "/runners", body: `{"name":"new","labels":null}`, status: 201,
			check: func(t *testing.T, f *fixture, b []byte) { assert.Contains(t, string(b), `"labels":[]`) }},
		{name: "register empty name", auth: "join", method: "POST", path: "/runners", body: `{"name":"","labels":[]}`, status: 400},
		{name: "register blank name", auth: "join", method: "POST", path: "/runners", body: `{"name":"  "}`, status: 400},
		{name: "register no body", auth: "join", method: "POST", path: "/runners", status: 400},
		{name: "register null", auth: "join", method: "POST", path: "/runners", body: `null`, status: 400},
		{name: "register bad JSON", auth: "join", method: "POST", path: "/runners", body: `{"name":`, status: 400},
		{name: "register wrong type", auth: "join", method: "POST", path: "/runners", body: `{"name":3}`, status: 400},
		{name: "register trailing data", auth: "join", method: "POST", path: "/runners", body: `{"name":"a"} {}`, status: 400},
		{name: "register body too large", auth: "join", method: "POST", path: "/runners", body: `{"name":"` + strings.Repeat("a", 1<<20) + `"}`, status: 413},
		// Names are not unique: the token, not the name, identifies a registration.
		{name: "register a name that is taken", auth: "join", method: "POST", path: "/runners", body: `{"name":"busy"}`, status: 201,
			check: func(t *testing.T, f *fixture, b []byte) {
				r := decodeJSON[registry.Registration](t, b)
				assert.Equal(t, "r-3", r.ID)
				assert.NotEmpty(t, r.Token)
				assert.NotEqual(t, f.tokens["r-1"], r.Token)
				assert.Equal(t, registry.DefaultLease, r.Lease())
			}},
		{name: "register without a token", method: "POST", path: "/runners", body: `{"name":"stranger"}`, status: 401},
		{name: "register with a made-up token", auth: "guess", method: "POST", path: "/runners", body: `{"name":"stranger"}`, status: 403},
		{name: "register with a runner's token", auth: "r-1", method: "POST", path: "/runners", body: `{"name":"stranger"}`, status: 403},
		{name: "register with the admin token", auth: "admin", method: "POST", path: "/runners", body: `{"name":"operator's"}`, status: 201},
		{name: "register long name", auth: "join", method: "POST", path: "/runners", body: `{"name":"` + strings.Repeat("a", 257) + `"}`, status: 400},
		{name: "register too many labels", auth: "join", method: "POST", path: "/runners", body: `{"name":"a","labels":[` + strings.Repeat(`"x",`, 32) + `"x"]}`, status: 400},
		{name: "register long label", auth: "join", method: "POST", path: "/runners", body: `{"name":"a","labels":["` + strings.Repeat("a", 257) + `"]}`, status: 400},

		// GET /runners
		{name: "list runners", method: "GET", path: "/runners", status: 200,
			check: func(t *testing.T, f *fixture, b []byte) {
				rs := decodeJSON[[]registry.Runner](t, b)
				require.Len(t, rs, 2)
				assert.Equal(t, "r-1", rs[0].ID)
				assert.Equal(t, "j-1", rs[0].JobID)
				assert.Equal(t, "r-2", rs[1].ID)
				assert.Equal(t, []string{"linux", "x86"}, rs[1].Labels)
				assert.NotContains(t, string(b), "null")
				assert.NotContains(t, string(b), "token")
				assert.NotContains(t, string(b), f.tokens["r-1"])
			}},
		{name: "list runners by name", method: "GET", path: "/runners?name=idle", status: 200,
			check: func(t *testing.T, f *fixture, b []byte) {
				rs := decodeJSON[[]registry.Runner](t, b)
				require.Len(t, rs, 1)
				assert.Equal(t, "r-2", rs[0].ID)
			}},
		{name: "list runners unknown name", method: "GET", path: "/runners?name=nobody", status: 200,
			check: func(t *testing.T, f *fixture, b []byte) { assert.JSONEq(t, `[]`, string(b)) }},

		// DELETE /runners/{id}
		{name: "remove idle runner", auth: "r-2", method: "DELETE", path: "/runners/r-2", status: 204,
			check: func(t *testing.T, f *fixture, b []byte) {
				assert.Empty(t, b)
				rs, err := f.c.Runners(t.Context(), "")
				require.NoError(t, err)
				require.Len(t, rs, 1)
				assert.Equal(t, "r-1", rs[0].ID)
			}},
		{name: "remove busy runner", auth: "r-1", method: "DELETE", path: "/runners/r-1", status: 204,
			check: func(t *testing.T, f *fixture, b []byte) {
				assert.Equal(t, registry.JobQueued, f.job(t, "j-1").State)
			}},
		{name: "remove another runner with the admin token", auth: "admin", method: "DELETE", path: "/runners/r-1", status: 204},
		{name: "remove another runner with its own token", auth: "r-2", method: "DELETE", path: "/runners/r-1", status: 403},
		{name: "remove without a token", method: "DELETE", path: "/runners/r-1", status: 401},
		{name: "remove with a made-up token", auth: "guess", method: "DELETE", path: "/runners/r-1", status: 403},
		{name: "remove unknown runner", auth: "admin", method: "DELETE", path: "/runners/r-9", status: 404},

		// POST /runners/{id}/claim
		{name: "claim", auth: "r-2", method: "POST", path: "/runners/r-2/claim", status: 200,
			check: func(t *testing.T, f *fixture, b []byte) {
				j := decodeJSON[registry.Job](t, b)
				assert.Equal(t, "j-2", j.ID)
				assert.Equal(t, registry.JobRunning, j.State)
				assert.Equal(t, "r-2", j.RunnerID)
				assert.Equal(t, 1, j.Attempts)
				assert.Empty(t, j.History)
				rs, err := f.c.Runners(t.Context(), "idle")
				require.NoError(t, err)
				assert.Equal(t, "j-2", rs[0].JobID)
			}},
		{name: "claim while running a job", auth: "r-1", method: "POST", path: "/runners/r-1/claim", status: 409,
			check: func(t *testing.T, f *fixture, b []byte) { assert.Contains(t, string(b), "j-1") }},
		{name: "claim unknown runner", auth: "r-2", method: "POST", path: "/runners/r-9/claim", status: 404},
		{name: "claim with another runner's token", auth: "r-1", method: "POST", path: "/runners/r-2/claim", status: 403},
		{name: "claim with the admin token", auth: "admin", method: "POST", path: "/runners/r-2/claim", status: 403},
		{name: "claim without a token", method: "POST", path: "/runners/r-2/claim", status: 401},

		// POST /runners/{id}/heartbeat
		{name: "heartbeat", auth: "r-1", method: "POST", path: "/runners/r-1/heartbeat", status: 204},
		{name: "heartbeat unknown runner", auth: "r-1", method: "POST", path: "/runners/r-9/heartbeat", status: 404},
		{name: "heartbeat with another runner's token", auth: "r-2", method: "POST", path: "/runners/r-1/heartbeat", status: 403},
		{name: "heartbeat without a token", method: "POST", path: "/runners/r-1/heartbeat", status: 401},

		// POST /jobs
		{name: "enqueue", auth: "admin", method: "POST", path: "/jobs", body: `{"command":"make test"}`, status: 201,
			check: func(t *testing.T, f *fixture, b []byte) {
				j := decodeJSON[registry.Job](t, b)
				assert.Equal(t, "j-3", j.ID)
				assert.Equal(t, "make test", j.Command)
				assert.Equal(t, registry.JobQueued, j.State)
				assert.Zero(t, j.Attempts)
				assert.Contains(t, string(b), `"history":[]`)
				assert.False(t, j.CreatedAt.IsZero())
				assert.Equal(t, j.CreatedAt, j.UpdatedAt)
			}},
		{name: "enqueue empty command", auth: "admin", method: "POST", path: "/jobs", body: `{"command":""}`, status: 400},
		{name: "enqueue no command", auth: "admin", method: "POST", path: "/jobs", body: `{}`, status: 400},
		{name: "enqueue bad JSON", auth: "admin", method: "POST", path: "/jobs", body: `command=true`, status: 400},
		{name: "enqueue the longest command", auth: "admin", method: "POST", path: "/jobs", body: `{"command":"` + strings.Repeat("a", registry.DefaultMaxCommand) + `"}`, status: 201},
		{name: "enqueue too long a command", auth: "admin", method: "POST", path: "/jobs", body: `{"command":"` + strings.Repeat("a", registry.DefaultMaxCommand+1) + `"}`, status: 413,
			check: func(t *testing.T, f *fixture, b []byte) { assert.Contains(t, string(b), "longer than 65536") }},
		{name: "enqueue without a token", method: "POST", path: "/jobs", body: `{"command":"true"}`, status: 401},
		{name: "enqueue with a runner's token", auth: "r-1", method: "POST", path: "/jobs", body: `{"command":"true"}`, status: 403},

		// GET /jobs, GET /jobs/{id}
		{name: "list jobs", auth: "admin", method: "GET", path: "/jobs", status: 200,
			check: func(t *testing.T, f *fixture, b []byte) {
				js := decodeJSON[[]registry.Job](t, b)
				require.Len(t, js, 2)
				assert.Equal(t, "j-1", js[0].ID)
				assert.Equal(t, registry.JobRunning, js[0].State)
				assert.Equal(t, "r-1", js[0].RunnerID)
				assert.Equal(t, "j-2", js[1].ID)
				assert.Equal(t, registry.JobQueued, js[1].State)
				assert.NotContains(t, string(b), "null")
			}},
		{name: "get job", auth: "admin", method: "GET", path: "/jobs/j-2", status: 200,
			check: func(t *testing.T, f *fixture, b []byte) {
				assert.Equal(t, "echo two", decodeJSON[registry.Job](t, b).Command)
			}},
		{name: "get job with its runner's token", auth: "r-1", method: "GET", path: "/jobs/j-1", status: 200},
		{name: "get unknown job", auth: "admin", method: "GET", path: "/jobs/j-9", status: 404},
		{name: "get unknown job with a runner's token", auth: "r-1", method: "GET", path: "/jobs/j-9", status: 403},
		{name: "list jobs without a token", method: "GET", path: "/jobs", status: 401},
		{name: "list jobs with a runner's token", auth: "r-1", method: "GET", path: "/jobs", status: 403},
		{name: "get job without a token", method: "GET", path: "/jobs/j-1", status: 401},
		{name: "get job with another runner's token", auth: "r-2", method: "GET", path: "/jobs/j-1", status: 403},
		{name: "get job with a made-up token", auth: "guess", method: "GET", path: "/jobs/j-1", status: 403},

		// POST /jobs/{id}/result
		{name: "report succeeded", auth: "r-1", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1","state":"succeeded","exit_code":0,"output":"one\n"}`, status: 200,
			check: func(t *testing.T, f *fixture, b []byte) {
				j := decodeJSON[registry.Job](t, b)
				assert.Equal(t, registry.JobSucceeded, j.State)
				assert.Empty(t, j.RunnerID)
				assert.Equal(t, exit(0), j.ExitCode)
				assert.Equal(t, "one\n", j.Output)
				require.Len(t, j.History, 1)
				assert.Equal(t, registry.JobSucceeded, j.History[0].State)
				rs, err := f.c.Runners(t.Context(), "busy")
				require.NoError(t, err)
				assert.Empty(t, rs[0].JobID, "the runner is free again")
			}},
		{name: "report failed", auth: "r-1", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1","state":"failed","exit_code":3}`, status: 200,
			check: func(t *testing.T, f *fixture, b []byte) {
				j := decodeJSON[registry.Job](t, b)
				assert.Equal(t, registry.JobFailed, j.State)
				assert.Equal(t, exit(3), j.ExitCode)
			}},
		{name: "report interrupted", auth: "r-1", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1","state":"interrupted","reason":"spot interruption"}`, status: 200,
			check: func(t *testing.T, f *fixture, b []byte) {
				j := decodeJSON[registry.Job](t, b)
				assert.Equal(t, registry.JobQueued, j.State)
				assert.Empty(t, j.RunnerID)
				require.Len(t, j.History, 1)
				assert.Equal(t, "spot interruption", j.History[0].Reason)
			}},
		{name: "report state running", auth: "r-1", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1","state":"running"}`, status: 400},
		{name: "report state queued", auth: "r-1", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1","state":"queued"}`, status: 400},
		{name: "report no state", auth: "r-1", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1"}`, status: 400},
		{name: "report bad JSON", auth: "r-1", method: "POST", path: "/jobs/j-1/result", body: `{`, status: 400},
		{name: "report unknown job", auth: "r-1", method: "POST", path: "/jobs/j-9/result", body: `{"runner_id":"r-1","state":"succeeded"}`, status: 404},
		{name: "report from another runner", auth: "r-2", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-2","state":"succeeded"}`, status: 409},
		{name: "report for another runner", auth: "r-2", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1","state":"succeeded"}`, status: 403},
		{name: "report without runner", auth: "r-1", method: "POST", path: "/jobs/j-1/result", body: `{"state":"succeeded"}`, status: 404},
		{name: "report without a token", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1","state":"succeeded"}`, status: 401},
		{name: "report with the admin token", auth: "admin", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1","state":"succeeded"}`, status: 403},
		{name: "report the longest output", auth: "r-1", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1","state":"succeeded","output":"` + strings.Repeat("a", registry.DefaultMaxOutput) + `"}`, status: 200,
			check: func(t *testing.T, f *fixture, b []byte) {
				assert.Len(t, decodeJSON[registry.Job](t, b).Output, registry.OutputLimit)
			}},
		{name: "report too long an output", auth: "r-1", method: "POST", path: "/jobs/j-1/result", body: `{"runner_id":"r-1","state":"succeeded","output":"` + strings.Repeat("a", registry.DefaultMaxOutput+1) + `"}`, status: 413,
			check: func(t *testing.T, f *fixture, b []byte) { assert.Contains(t, string(b), "send its tail") }},
		{name: "report queued job", auth: "r-1", method: "POST", path: "/jobs/j-2/result", body: `{"runner_id":"r-1","state":"succeeded"}`, status: 409},

		// Unknown paths and wrong methods
		{name: "root", method: "GET", path: "/", status: 404},
		{name: "unknown path", method: "GET", path: "/nope", status: 404},
		{name: "runners trailing slash", method: "GET", path: "/runners/", status: 404},
		{name: "too deep", method: "POST", path: "/runners/r-1/claim/now", status: 404},
		{name: "PUT runners", method: "PUT", path: "/runners", status: 405, allow: "GET, HEAD, POST"},
		{name: "GET runner", method: "GET", path: "/runners/r-1", status: 405, allow: "DELETE"},
		{name: "GET claim", method: "GET", path: "/runners/r-1/claim", status: 405, allow: "POST"},
		{name: "DELETE jobs", method: "DELETE", path: "/jobs", status: 405, allow: "GET, HEAD, POST"},
		{name: "DELETE job", method: "DELETE", path: "/jobs/j-1", status: 405, allow: "GET, HEAD"},
		{name: "GET result", method: "GET", path: "/jobs/j-1/result", status: 405, allow: "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := endpointFixture(t)
			before := f.snapshot(t)
			status, h, body := f.call(t, tt.auth, tt.method, tt.path, tt.body)
			require.Equal(t, tt.status, status, "body %s", body)
			if status >= 400 {
				assert.Equal(t, "application/json", h.Get("Content-Type"))
				e := decodeJSON[struct {
					Error string `json:"error"`
				}](t, body)
				assert.NotEmpty(t, e.Error)
				assert.Equal(t, before, f.snapshot(t), "a failed request changes nothing")
			}
			if status == 401 {
				assert.Equal(t, "Bearer", h.Get("WWW-Authenticate"))
			}
			if status == 405 {
				assert.Equal(t, tt.allow, h.Get("Allow"))
			}
			if tt.check != nil {
				tt.check(t, f, body)
			}
		})
	}
}

func TestClaimOrder(t *testing.T) {
	f := newFixture(t)
	a, b, c := f.register(t, "a"), f.register(t, "b"), f.register(t, "c")

	assert.Nil(t, f.claim(t, a.ID), "nothing queued")
	for _, cmd := range []string{"first", "second", "third"} {
		f.enqueue(t, cmd)
	}
	assert.Equal(t, "j-1", f.claim(t, a.ID).ID)
	assert.Equal(t, "j-2", f.claim(t, b.ID).ID)

	// j-1 is interrupted: it is older than j-3, so it runs again first.
	_, err := f.as(a.ID).Report(t.Context(), "j-1", registry.Result{RunnerID: a.ID, State: registry.JobInterrupted})
	require.NoError(t, err)
	j := f.claim(t, c.ID)
	assert.Equal(t, "j-1", j.ID)
	assert.Equal(t, 2, j.Attempts)
	assert.Equal(t, "j-3", f.claim(t, a.ID).ID)

	_, err = f.as(b.ID).Report(t.Context(), "j-2", registry.Result{RunnerID: b.ID, State: registry.JobSucceeded, ExitCode: exit(0)})
	require.NoError(t, err)
	assert.Nil(t, f.claim(t, b.ID), "every job taken")
}

func TestInterruptedIsRequeuedWithHistory(t *testing.T) {
	f := newFixture(t)
	r1, r2 := f.register(t, "r1"), f.register(t, "r2")
	f.enqueue(t, "sleep 600")
	claimed := f.claim(t, r1.ID)

	out := strings.Repeat("x", registry.OutputLimit) + "tail\n"
	j, err := f.as(r1.ID).Report(t.Context(), claimed.ID, registry.Result{
		RunnerID: r1.ID, State: registry.JobInterrupted, ExitCode: exit(143), Output: out, Reason: "spot instance-action terminate",
	})
	require.NoError(t, err)
	assert.Equal(t, registry.JobQueued, j.State)
	assert.Empty(t, j.RunnerID)
	assert.Equal(t, 1, j.Attempts)
	assert.Equal(t, exit(143), j.ExitCode)
	assert.Len(t, j.Output, registry.OutputLimit)
	assert.True(t, strings.HasSuffix(j.Output, "tail\n"))
	assert.Equal(t, []registry.Attempt{{
		Attempt: 1, RunnerID: r1.ID, State: registry.JobInterrupted, ExitCode: exit(143),
		Reason: "spot instance-action terminate", Started: claimed.UpdatedAt, Ended: j.UpdatedAt,
	}}, j.History)
	assert.False(t, j.History[0].Ended.Before(j.History[0].Started))

	rs, err := f.c.Runners(t.Context(), r1.Name)
	require.NoError(t, err)
	assert.Empty(t, rs[0].JobID, "the runner is free")

	// Another runner takes it over and finishes it: the history keeps both.
	again := f.claim(t, r2.ID)
	require.Equal(t, claimed.ID, again.ID)
	assert.Equal(t, 2, again.Attempts)
	j, err = f.as(r2.ID).Report(t.Context(), again.ID, registry.Result{RunnerID: r2.ID, State: registry.JobSucceeded, ExitCode: exit(0)})
	require.NoError(t, err)
	assert.Equal(t, registry.JobSucceeded, j.State)
	assert.Equal(t, exit(0), j.ExitCode)
	assert.Empty(t, j.Output, "the output is the last attempt's")
	require.Len(t, j.History, 2)
	assert.Equal(t, 2, j.History[1].Attempt)
	assert.Equal(t, r2.ID, j.History[1].RunnerID)
	assert.Equal(t, registry.JobSucceeded, j.History[1].State)

	// Finished is final.
	_, err = f.as(r2.ID).Report(t.Context(), j.ID, registry.Result{RunnerID: r2.ID, State: registry.JobFailed})
	assert.ErrorIs(t, err, registry.ErrConflict)
}

func TestInterruptedWithoutReason(t *testing.T) {
	f := newFixture(t)
	r := f.register(t, "r")
	f.enqueue(t, "true")
	f.claim(t, r.ID)
	j, err := f.as(r.ID).Report(t.Context(), "j-1", registry.Result{RunnerID: r.ID, State: registry.JobInterrupted})
	require.NoError(t, err)
	assert.NotEmpty(t, j.History[0].Reason)
}

func TestRemoveRunnerRequeuesItsJob(t *testing.T) {
	f := newFixture(t)
	doomed, other := f.register(t, "doomed"), f.register(t, "other")
	f.enqueue(t, "make")
	claimed := f.claim(t, doomed.ID)

	require.NoError(t, f.as(doomed.ID).Remove(t.Context(), doomed.ID))

	j := f.job(t, claimed.ID)
	assert.Equal(t, registry.JobQueued, j.State)
	assert.Empty(t, j.RunnerID)
	require.Len(t, j.History, 1)
	assert.Equal(t, registry.Attempt{
		Attempt: 1, RunnerID: doomed.ID, State: registry.JobInterrupted,
		Reason: "runner removed while running the job", Started: claimed.UpdatedAt, Ended: j.UpdatedAt,
	}, j.History[0])

	// The removed runner's late report is refused and changes nothing: its
	// registration is gone (404).
	_, err := f.as(doomed.ID).Report(t.Context(), claimed.ID, registry.Result{RunnerID: doomed.ID, State: registry.JobSucceeded, ExitCode: exit(0)})
	require.ErrorIs(t, err, registry.ErrNotFound)
	assert.Equal(t, j, f.job(t, claimed.ID))

	// So is anything else it tries.
	_, err = f.as(doomed.ID).Claim(t.Context(), doomed.ID)
	assert.ErrorIs(t, err, registry.ErrNotFound)
	assert.ErrorIs(t, f.as(doomed.ID).Heartbeat(t.Context(), doomed.ID), registry.ErrNotFound)
	assert.ErrorIs(t, f.as(doomed.ID).Remove(t.Context(), doomed.ID), registry.ErrNotFound)

	// The job runs again elsewhere.
	again := f.claim(t, other.ID)
	require.NotNil(t, again)
	assert.Equal(t, claimed.ID, again.ID)
	assert.Equal(t, 2, again.Attempts)
}

func TestReRegisterAfterRemove(t *testing.T) {
	// What the runner does at start-up after a crash: remove its stale
	// registration with the token it kept, register again under a new id.
	f := newFixture(t)
	old := f.register(t, "ci-1")
	require.NoError(t, f.as(old.ID).Remove(t.Context(), old.ID))
	fresh := f.register(t, "ci-1")
	assert.NotEqual(t, old.ID, fresh.ID)
	assert.Equal(t, "r-2", fresh.ID)
	assert.NotEqual(t, old.Token, fresh.Token)
	_, err := f.c.WithToken(old.Token).Claim(t.Context(), fresh.ID)
	assert.ErrorIs(t, err, registry.ErrUnauthorized, "the old token is not the new registration's")
}

// A second host that registers under the name of a runner that is running
// a job gets its own registration, and cannot take that runner's job: not
// by claiming it, reporting it or removing its registration.
func TestSameNameCannotTakeAnothersJob(t *testing.T) {
	f := newFixture(t)
	first := f.register(t, "ci-1")
	f.enqueue(t, "make")
	job := f.claim(t, first.ID)
	second := f.register(t, "ci-1")

	assert.Nil(t, f.claim(t, second.ID), "nothing else queued")
	_, err := f.as(second.ID).Report(t.Context(), job.ID, registry.Result{RunnerID: first.ID, State: registry.JobInterrupted})
	assert.ErrorIs(t, err, registry.ErrUnauthorized)
	_, err = f.as(second.ID).Report(t.Context(), job.ID, registry.Result{RunnerID: second.ID, State: registry.JobInterrupted})
	assert.ErrorIs(t, err, registry.ErrConflict)
	assert.ErrorIs(t, f.as(second.ID).Remove(t.Context(), first.ID), registry.ErrUnauthorized)

	j := f.job(t, job.ID)
	assert.Equal(t, registry.JobRunning, j.State)
	assert.Equal(t, first.ID, j.RunnerID)
	assert.Equal(t, 1, j.Attempts)
}

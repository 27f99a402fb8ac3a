package registry_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

func TestStateSurvivesRestart(t *testing.T) {
	f := newFixture(t)
	a, b, c := f.register(t, "a", "linux"), f.register(t, "b"), f.register(t, "c")
	for _, cmd := range []string{"true", "false", "sleep 600", "make"} {
		f.enqueue(t, cmd)
	}
	f.claim(t, a.ID) // j-1
	_, err := f.as(a.ID).Report(t.Context(), "j-1", registry.Result{RunnerID: a.ID, State: registry.JobSucceeded, ExitCode: exit(0), Output: "ok"})
	require.NoError(t, err)
	f.claim(t, b.ID) // j-2
	_, err = f.as(b.ID).Report(t.Context(), "j-2", registry.Result{RunnerID: b.ID, State: registry.JobFailed, ExitCode: exit(1)})
	require.NoError(t, err)
	f.claim(t, c.ID)                                  // j-3
	require.NoError(t, f.c.Remove(t.Context(), c.ID)) // j-3 re-queued, c is the highest runner id
	running := f.claim(t, a.ID)                       // j-3 again, still running at the restart
	before := f.snapshot(t)

	g := reopen(t, f)
	assert.Equal(t, before, g.snapshot(t))

	// A job running at the restart can be finished after it, with the
	// runner's token from before it, and its attempt keeps its start time.
	j, err := g.as(a.ID).Report(t.Context(), running.ID, registry.Result{RunnerID: a.ID, State: registry.JobSucceeded, ExitCode: exit(0)})
	require.NoError(t, err)
	require.Len(t, j.History, 2)
	assert.Equal(t, running.UpdatedAt, j.History[1].Started)

	// Ids are never reused: c (r-3) is gone, but the next runner is r-4.
	assert.Equal(t, "r-4", g.register(t, "d").ID)
	assert.Equal(t, "j-5", g.enqueue(t, "echo").ID)

	// And across one more restart.
	h := reopen(t, g)
	assert.Equal(t, g.snapshot(t), h.snapshot(t))
	assert.Equal(t, "r-5", h.register(t, "e").ID)
	assert.Equal(t, "j-6", h.enqueue(t, "echo").ID)
}

func TestIDsNotReusedAfterRemovingAll(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"a", "b"} {
		r := f.register(t, name)
		require.NoError(t, f.as(r.ID).Remove(t.Context(), r.ID))
	}
	g := openFixture(t, f.path)
	assert.Empty(t, g.snapshot(t).Runners)
	assert.Equal(t, "r-3", g.register(t, "a").ID)
}

func TestNewServer(t *testing.T) {
	write := func(content string) func(t *testing.T) string {
		return func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "registry.json")
			require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
			return p
		}
	}
	const header = `"version":2,"next_runner":3,"next_job":3`
	hash := `"token_sha256":"` + hashOf("t") + `"`
	tests := []struct {
		name    string
		path    func(t *testing.T) string
		wantErr string // "" for success; otherwise a part of the error besides the path
	}{
		{"missing file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "new.json") }, ""},
		{"valid file", write(`{` + header + `,"runners":[{"id":"r-2","name":"a","labels":null,"registered_at":"2026-01-02T03:04:05Z",` + hash + `}],"jobs":[]}`), ""},
		// Names are not unique: the token identifies a registration.
		{"two runners of one name", write(`{` + header + `,"runners":[{"id":"r-1","name":"a",` + hash + `},{"id":"r-2","name":"a",` + hash + `}]}`), ""},
		{"no lists", write(`{` + header + `}`), ""},
		{"empty path", func(*testing.T) string { return "" }, "empty"},
		{"missing directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope", "registry.json") }, "no such file"},
		{"directory is a file", func(t *testing.T) string {
			p := write("x")(t)
			return filepath.Join(p, "registry.json")
		}, "not a directory"},
		{"not JSON", write(`{"version":1,`), "corrupt"},
		{"empty file", write(``), "corrupt"},
		{"another JSON file", write(`{"name":"my-package","version":"1.0.0"}`), "corrupt"},
		{"version 1", write(`{"version":1,"next_runner":1,"next_job":1}`), "corrupt"},
		{"runner without a token", write(`{` + header + `,"runners":[{"id":"r-1","name":"a"}]}`), "corrupt"},
		{"runner with a bad token hash", write(`{` + header + `,"runners":[{"id":"r-1","name":"a","token_sha256":"abc"}]}`), "corrupt"},
		{"no version", write(`{}`), "corrupt"},
		{"unknown field", write(`{` + header + `,"extra":1}`), "corrupt"},
		{"trailing data", write(`{` + header + `} {}`), "corrupt"},
		{"id not below next", write(`{` + header + `,"runners":[{"id":"r-3","name":"a",` + hash + `}]}`), "corrupt"},
		{"bad id", write(`{` + header + `,"runners":[{"id":"runner-1","name":"a",` + hash + `}]}`), "corrupt"},
		{"duplicate id", write(`{` + header + `,"runners":[{"id":"r-1","name":"a",` + hash + `},{"id":"r-1","name":"b",` + hash + `}]}`), "corrupt"},
		{"bad state", write(`{` + header + `,"jobs":[{"id":"j-1","command":"true","state":"done","history":[]}]}`), "corrupt"},
		{"running on nobody", write(`{` + header + `,"jobs":[{"id":"j-1","command":"true","state":"running","runner_id":"r-1","attempts":1}]}`), "corrupt"},
		{"runner's job not running", write(`{` + header + `,"runners":[{"id":"r-1","name":"a","job_id":"j-1",` + hash + `}],"jobs":[{"id":"j-1","command":"true","state":"queued"}]}`), "corrupt"},
		{"zero next id", write(`{"version":2,"next_runner":0,"next_job":1}`), "corrupt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path(t)
			before, _ := os.ReadFile(path)
			srv, err := registry.NewServer(path, nil)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, srv)
				return
			}
			require.Error(t, err)
			assert.Nil(t, srv)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Contains(t, err.Error(), path, "the error names the file")
			after, _ := os.ReadFile(path)
			assert.Equal(t, before, after, "a bad file is left alone")
		})
	}
}

func TestValidFileLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"version":2,"next_runner":3,"next_job":3,
		"runners":[{"id":"r-2","name":"a","labels":null,"registered_at":"2026-01-02T03:04:05Z","job_id":"j-2","token_sha256":"`+hashOf("r-2's token")+`"}],
		"jobs":[{"id":"j-2","command":"true","state":"running","runner_id":"r-2","attempts":1,"history":null,
		         "created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:06Z","attempt_started":"2026-01-02T03:04:06Z"}]}`), 0o600))
	f := openFixture(t, path)
	status, _, body := f.call(t, "", "GET", "/runners", "")
	require.Equal(t, 200, status)
	assert.Contains(t, string(body), `"labels":[]`)
	assert.NotContains(t, string(body), "token")
	status, _, body = f.call(t, "admin", "GET", "/jobs", "")
	require.Equal(t, 200, status)
	assert.Contains(t, string(body), `"history":[]`)
	j, err := f.c.WithToken("r-2's token").Report(t.Context(), "j-2", registry.Result{RunnerID: "r-2", State: registry.JobSucceeded})
	require.NoError(t, err)
	assert.Equal(t, "2026-01-02T03:04:06Z", j.History[0].Started.Format("2006-01-02T15:04:05Z07:00"))
	assert.Equal(t, "r-3", f.register(t, "b").ID)
}

// TestFailedSaveChangesNothing takes the state file's directory away, so
// that every write fails (even for root), and checks that the failed changes
// were not applied in memory either.
func TestFailedSaveChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(dir, 0o700))
	f := openFixture(t, filepath.Join(dir, "registry.json"))
	a, idle := f.register(t, "a"), f.register(t, "idle")
	f.enqueue(t, "true")
	f.claim(t, a.ID)
	before := f.snapshot(t)

	require.NoError(t, os.RemoveAll(dir))
	for _, req := range []struct{ auth, method, path, body string }{
		{"join", "POST", "/runners", `{"name":"b"}`},
		{"admin", "POST", "/jobs", `{"command":"echo"}`},
		{"r-1", "POST", "/jobs/j-1/result", `{"runner_id":"r-1","state":"succeeded"}`},
		{"r-1", "POST", "/jobs/j-1/result", `{"runner_id":"r-1","state":"interrupted"}`},
		{"r-1", "DELETE", "/runners/r-1", ""},
		{"admin", "DELETE", "/runners/r-2", ""},
	} {
		status, _, body := f.call(t, req.auth, req.method, req.path, req.body)
		assert.Equal(t, http.StatusInternalServerError, status, "%s %s", req.method, req.path)
		assert.Contains(t, string(body), "saving state")
		assert.Equal(t, before, f.snapshot(t), "%s %s changed the state", req.method, req.path)
	}
	// A claim with nothing queued changes nothing, so it needs no write.
	job, err := f.as(idle.ID).Claim(t.Context(), idle.ID)
	require.NoError(t, err)
	assert.Nil(t, job)

	// Once the directory is back, the change that failed works, with the id
	// the failed attempt did not consume.
	require.NoError(t, os.Mkdir(dir, 0o700))
	assert.Equal(t, "r-3", f.register(t, "b").ID)
	g := openFixture(t, f.path)
	assert.Equal(t, f.snapshot(t), g.snapshot(t), "memory and disk agree")
}

func TestNoTemporaryFilesLeft(t *testing.T) {
	f := newFixture(t)
	f.register(t, "a")
	f.enqueue(t, "true")
	entries, err := os.ReadDir(filepath.Dir(f.path))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{filepath.Base(f.path)}, names)
}

// A registry that dies between creating its temporary file and renaming it
// leaves the file behind: the next start removes it, and only it.
func TestTemporaryFilesOfACrashAreRemovedAtLoad(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("state file exists: %v", existing), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "registry.json")
			if existing {
				f := openFixture(t, path)
				f.register(t, "a")
			}
			for _, name := range []string{".registry.json.tmp-123", ".registry.json.tmp-"} {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(`{"half":`), 0o600))
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "other.json"), nil, 0o600))
			openFixture(t, path)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			want := []string{"other.json"}
			if existing {
				want = append(want, "registry.json")
			}
			assert.Equal(t, want, names)
		})
	}
}

// The state file holds a hash of each runner's token, never the token.
func TestTokensAreNotInTheStateFile(t *testing.T) {
	f := newFixture(t)
	r := f.register(t, "a")
	data, err := os.ReadFile(f.path)
	require.NoError(t, err)
	assert.NotContains(t, string(data), r.Token)
	assert.NotContains(t, string(data), adminToken)
	assert.Contains(t, string(data), hashOf(r.Token))
}

// reopen serves a new Server loaded from f's state file, knowing f's
// runners' tokens.
func reopen(t *testing.T, f *fixture) *fixture {
	g := openFixture(t, f.path)
	maps.Copy(g.tokens, f.tokens)
	return g
}

func hashOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

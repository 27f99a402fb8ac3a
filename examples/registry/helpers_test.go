package registry_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

// fixture is a registry on a real loopback HTTP server, with its state file
// in t.TempDir().
type fixture struct {
	path string // state file
	ts   *httptest.Server
	c    *registry.Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return openFixture(t, filepath.Join(t.TempDir(), "registry.json"))
}

// openFixture serves a new Server loaded from path.
func openFixture(t *testing.T, path string) *fixture {
	t.Helper()
	srv, err := registry.NewServer(path)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &fixture{path: path, ts: ts, c: registry.NewClient(ts.URL, ts.Client())}
}

// call sends a raw request and returns the status, headers and body.
func (f *fixture) call(t *testing.T, method, path, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, f.ts.URL+path, rd)
	require.NoError(t, err)
	resp, err := f.ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

func (f *fixture) register(t *testing.T, name string, labels ...string) registry.Runner {
	t.Helper()
	r, err := f.c.Register(t.Context(), name, labels)
	require.NoError(t, err)
	return r
}

func (f *fixture) enqueue(t *testing.T, command string) registry.Job {
	t.Helper()
	j, err := f.c.Enqueue(t.Context(), command)
	require.NoError(t, err)
	return j
}

func (f *fixture) claim(t *testing.T, runnerID string) *registry.Job {
	t.Helper()
	j, err := f.c.Claim(t.Context(), runnerID)
	require.NoError(t, err)
	return j
}

func (f *fixture) job(t *testing.T, id string) registry.Job {
	t.Helper()
	j, err := f.c.Job(t.Context(), id)
	require.NoError(t, err)
	return j
}

// snapshot is everything the API shows.
type snapshot struct {
	Runners []registry.Runner
	Jobs    []registry.Job
}

func (f *fixture) snapshot(t *testing.T) snapshot {
	t.Helper()
	ctx := context.Background()
	rs, err := f.c.Runners(ctx, "")
	require.NoError(t, err)
	js, err := f.c.Jobs(ctx)
	require.NoError(t, err)
	return snapshot{rs, js}
}

func exit(n int) *int { return &n }

func decodeJSON[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "body %s", b)
	return v
}

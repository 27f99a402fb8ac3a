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
	"time"

	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

// adminToken and joinToken are the fixtures' admin and join tokens.
const (
	adminToken = "admin-secret"
	joinToken  = "join-secret"
)

// fixture is a registry on a real loopback HTTP server, with its state file
// in t.TempDir().
type fixture struct {
	path   string // state file
	ts     *httptest.Server
	c      *registry.Client  // with the admin token
	tokens map[string]string // runner id → token, of the runners registered through the fixture
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return openFixture(t, filepath.Join(t.TempDir(), "registry.json"))
}

// openFixture serves a new Server loaded from path.
func openFixture(t *testing.T, path string) *fixture {
	t.Helper()
	return openFixtureWith(t, path, nil, nil)
}

// openFixtureWith serves a new Server loaded from path, with cfg (its
// AdminToken is always adminToken, its JoinToken joinToken) and the clock
// now (nil: time.Now).
func openFixtureWith(t *testing.T, path string, cfg *registry.Config, now func() time.Time) *fixture {
	t.Helper()
	c := registry.Config{}
	if cfg != nil {
		c = *cfg
	}
	c.AdminToken, c.JoinToken = adminToken, joinToken
	if now == nil {
		now = time.Now
	}
	srv, err := registry.NewServerWithClock(path, &c, now)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &fixture{path: path, ts: ts, c: registry.NewClient(ts.URL, ts.Client()).WithToken(adminToken), tokens: map[string]string{}}
}

// as returns a client with the token of runner id, registered through f
// (or through a fixture whose tokens f was given).
func (f *fixture) as(id string) *registry.Client { return f.c.WithToken(f.tokens[id]) }

// call sends a raw request with the token for auth (see token) and returns
// the status, headers and body.
func (f *fixture) call(t *testing.T, auth, method, path, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, f.ts.URL+path, rd)
	require.NoError(t, err)
	if tok := f.token(auth); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := f.ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

// token returns the token that auth names: "admin", "join", a runner id
// registered through f, "" for none, or anything else as itself.
func (f *fixture) token(auth string) string {
	switch auth {
	case "admin":
		return adminToken
	case "join":
		return joinToken
	}
	if tok, ok := f.tokens[auth]; ok {
		return tok
	}
	return auth
}

func (f *fixture) register(t *testing.T, name string, labels ...string) registry.Registration {
	t.Helper()
	r, err := f.c.WithToken(joinToken).Register(t.Context(), name, labels)
	require.NoError(t, err)
	f.tokens[r.ID] = r.Token
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
	j, err := f.as(runnerID).Claim(t.Context(), runnerID)
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

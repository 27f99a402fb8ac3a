package registry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

// TestClientErrors checks that each API error reaches the caller as an
// *APIError with the status and the server's message.
func TestClientErrors(t *testing.T) {
	tests := []struct {
		name   string
		call   func(ctx context.Context, f *fixture) error
		status int
		is     error // ErrNotFound, ErrConflict, ErrUnauthorized or nil
	}{
		{"register empty name", func(ctx context.Context, f *fixture) error {
			_, err := f.c.Register(ctx, "", nil)
			return err
		}, 400, nil},
		{"register without a token", func(ctx context.Context, f *fixture) error {
			_, err := f.c.WithToken("").Register(ctx, "stranger", nil)
			return err
		}, 401, registry.ErrUnauthorized},
		{"jobs as a runner", func(ctx context.Context, f *fixture) error {
			_, err := f.as("r-1").Jobs(ctx)
			return err
		}, 403, registry.ErrUnauthorized},
		{"another runner's job", func(ctx context.Context, f *fixture) error {
			_, err := f.as("r-2").Job(ctx, "j-1")
			return err
		}, 403, registry.ErrUnauthorized},
		{"remove unknown", func(ctx context.Context, f *fixture) error {
			return f.c.Remove(ctx, "r-9")
		}, 404, registry.ErrNotFound},
		{"remove another runner", func(ctx context.Context, f *fixture) error {
			return f.as("r-2").Remove(ctx, "r-1")
		}, 403, registry.ErrUnauthorized},
		{"claim unknown runner", func(ctx context.Context, f *fixture) error {
			_, err := f.as("r-1").Claim(ctx, "r-9")
			return err
		}, 404, registry.ErrNotFound},
		{"claim while running", func(ctx context.Context, f *fixture) error {
			_, err := f.as("r-1").Claim(ctx, "r-1")
			return err
		}, 409, registry.ErrConflict},
		{"claim without a token", func(ctx context.Context, f *fixture) error {
			_, err := f.c.WithToken("").Claim(ctx, "r-2")
			return err
		}, 401, registry.ErrUnauthorized},
		{"heartbeat with another's token", func(ctx context.Context, f *fixture) error {
			return f.as("r-1").Heartbeat(ctx, "r-2")
		}, 403, registry.ErrUnauthorized},
		{"enqueue empty", func(ctx context.Context, f *fixture) error {
			_, err := f.c.Enqueue(ctx, "")
			return err
		}, 400, nil},
		{"enqueue as a runner", func(ctx context.Context, f *fixture) error {
			_, err := f.as("r-1").Enqueue(ctx, "true")
			return err
		}, 403, registry.ErrUnauthorized},
		{"unknown job", func(ctx context.Context, f *fixture) error {
			_, err := f.c.Job(ctx, "j-9")
			return err
		}, 404, registry.ErrNotFound},
		{"report unknown job", func(ctx context.Context, f *fixture) error {
			_, err := f.as("r-1").Report(ctx, "j-9", registry.Result{RunnerID: "r-1", State: registry.JobSucceeded})
			return err
		}, 404, registry.ErrNotFound},
		{"report not running here", func(ctx context.Context, f *fixture) error {
			_, err := f.as("r-2").Report(ctx, "j-1", registry.Result{RunnerID: "r-2", State: registry.JobSucceeded})
			return err
		}, 409, registry.ErrConflict},
		{"report bad state", func(ctx context.Context, f *fixture) error {
			_, err := f.as("r-1").Report(ctx, "j-1", registry.Result{RunnerID: "r-1", State: registry.JobRunning})
			return err
		}, 400, nil},
		{"id with a slash", func(ctx context.Context, f *fixture) error {
			_, err := f.c.Job(ctx, "j-1/result")
			return err
		}, 404, registry.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := endpointFixture(t)
			err := tt.call(t.Context(), f)
			require.Error(t, err)
			apiErr, ok := errors.AsType[*registry.APIError](err)
			require.True(t, ok, "%v is an *APIError", err)
			assert.Equal(t, tt.status, apiErr.Status)
			assert.NotEmpty(t, apiErr.Message)
			assert.Contains(t, err.Error(), apiErr.Message)
			for _, sentinel := range []error{registry.ErrNotFound, registry.ErrConflict, registry.ErrUnauthorized} {
				assert.Equal(t, sentinel == tt.is, errors.Is(err, sentinel), "errors.Is(err, %v)", sentinel)
			}
		})
	}
}

func TestClientTransportErrors(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	notAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jobs" {
			w.Write([]byte("<html>hello</html>")) // 200, not JSON
			return
		}
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	defer notAPI.Close()

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	t.Run("unreachable", func(t *testing.T) {
		_, err := registry.NewClient(closed.URL, nil).Jobs(t.Context())
		require.Error(t, err)
		_, isAPI := errors.AsType[*registry.APIError](err)
		assert.False(t, isAPI)
		_, isURL := errors.AsType[*url.Error](err)
		assert.True(t, isURL, "the transport error is wrapped: %v", err)
	})
	t.Run("cancelled", func(t *testing.T) {
		f := newFixture(t)
		_, err := f.c.Claim(cancelled, "r-1")
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("200 that is not JSON", func(t *testing.T) {
		_, err := registry.NewClient(notAPI.URL, notAPI.Client()).Jobs(t.Context())
		require.Error(t, err)
		_, isAPI := errors.AsType[*registry.APIError](err)
		assert.False(t, isAPI)
	})
	t.Run("error that is not JSON", func(t *testing.T) {
		_, err := registry.NewClient(notAPI.URL, notAPI.Client()).Job(t.Context(), "j-1")
		apiErr, ok := errors.AsType[*registry.APIError](err)
		require.True(t, ok)
		assert.Equal(t, http.StatusBadGateway, apiErr.Status)
		assert.Equal(t, "upstream down", apiErr.Message)
		assert.False(t, errors.Is(err, registry.ErrNotFound))
	})
}

func TestClientRoundTrip(t *testing.T) {
	f := newFixture(t)
	c := registry.NewClient(f.ts.URL+"/", nil) // trailing slash and default http.Client

	join := c.WithToken(joinToken)
	r, err := join.Register(t.Context(), "a b&c=d", nil) // a name that needs escaping in a query
	require.NoError(t, err)
	assert.Equal(t, []string{}, r.Labels)
	_, err = join.Register(t.Context(), "a", []string{"x"})
	require.NoError(t, err)

	rs, err := c.Runners(t.Context(), "a b&c=d")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.Equal(t, r.Runner, rs[0])
	rs, err = c.Runners(t.Context(), "")
	require.NoError(t, err)
	assert.Len(t, rs, 2)

	admin := c.WithToken(adminToken)
	js, err := admin.Jobs(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []registry.Job{}, js)

	queued, err := admin.Enqueue(t.Context(), "echo hi")
	require.NoError(t, err)
	got, err := admin.Job(t.Context(), queued.ID)
	require.NoError(t, err)
	assert.Equal(t, queued, got)

	c = c.WithToken(r.Token)
	require.NoError(t, c.Heartbeat(t.Context(), r.ID))
	claimed, err := c.Claim(t.Context(), r.ID)
	require.NoError(t, err)
	require.NotNil(t, claimed)
	done, err := c.Report(t.Context(), claimed.ID, registry.Result{RunnerID: r.ID, State: registry.JobFailed, ExitCode: exit(2), Output: "boom"})
	require.NoError(t, err)
	assert.Equal(t, registry.JobFailed, done.State)
	assert.Equal(t, "boom", done.Output)

	none, err := c.Claim(t.Context(), r.ID)
	require.NoError(t, err)
	assert.Nil(t, none)

	require.NoError(t, c.Remove(t.Context(), r.ID))
	rs, err = c.Runners(t.Context(), "a b&c=d")
	require.NoError(t, err)
	assert.Equal(t, []registry.Runner{}, rs)
}

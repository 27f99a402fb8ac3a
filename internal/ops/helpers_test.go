package ops_test

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/internal/ops"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait for something that should happen at once.
const wait = 10 * time.Second

// client keeps no idle connection, whose goroutines goleak would see.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: wait}

// start starts a Server for cfg, closed when the test ends.
func start(t *testing.T, cfg ops.Config) *ops.Server {
	t.Helper()
	s, err := ops.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// get fetches http://addr/path and returns its status and body.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := client.Get("http://" + addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// A clock is a time a test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 2, 1, 20, 18, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

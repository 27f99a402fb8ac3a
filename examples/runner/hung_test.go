//go:build linux

package main_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/registry"
)

// A hangingProxy stands between the runner and the registry. It forwards
// requests until hang is called; from then on it holds every request
// whose "METHOD /path" matches, as a hung registry would (one stopped with
// SIGSTOP, say), until the runner gives up on it, and tells the test which
// request it holds.
type hangingProxy struct {
	t       *testing.T
	url     string
	held    chan string // "METHOD /path" of each request held
	release chan struct{}

	mu      sync.Mutex
	pattern *regexp.Regexp
}

func newHangingProxy(t *testing.T, target string) *hangingProxy {
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &hangingProxy{t: t, held: make(chan string, 64), release: make(chan struct{})}
	forward := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := r.Method + " " + r.URL.Path
		p.mu.Lock()
		hang := p.pattern != nil && p.pattern.MatchString(req)
		p.mu.Unlock()
		if !hang {
			forward.ServeHTTP(w, r)
			return
		}
		select {
		case p.held <- req:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-p.release:
		}
	}))
	t.Cleanup(func() {
		close(p.release)
		ts.Close()
	})
	p.url = ts.URL
	return p
}

// hang holds the requests that match pattern from now on.
func (p *hangingProxy) hang(pattern string) {
	p.mu.Lock()
	p.pattern = regexp.MustCompile(pattern)
	p.mu.Unlock()
}

// waitHeld waits until the proxy holds a request that matches pattern.
func (p *hangingProxy) waitHeld(pattern string) {
	p.t.Helper()
	rx := regexp.MustCompile(pattern)
	timeout := time.After(wait)
	for {
		select {
		case req := <-p.held:
			if rx.MatchString(req) {
				return
			}
		case <-timeout:
			p.t.Fatalf("no request matching %q held", pattern)
		}
	}
}

// drainStartLimit is how long after a notice the drain may start, with the
// CI service hung.
const drainStartLimit = 50 * time.Millisecond

// A notice is seen at once, whatever the runner is doing: a request to a
// hung CI service is cut short, and the drain starts within
// drainStartLimit. With the registry hung the runner cannot unregister: it
// exits 3, before the deadline.
func TestNoticeInterruptsAHungCIService(t *testing.T) {
	tests := []struct {
		name string
		// setup brings the runner to the request that hangs, and returns
		// the timeline line that says the drain started.
		setup func(t *testing.T, e *env, px *hangingProxy, r func() *proc) (*proc, string)
		exit  int
	}{
		{"claiming", func(t *testing.T, e *env, px *hangingProxy, start func() *proc) (*proc, string) {
			r := start()
			r.waitLine(`ready: runner r-1`, 1)
			px.hang(`.`)
			px.waitHeld(`^POST /runners/r-1/claim$`)
			return r, `^\[T.*\] stopped claiming jobs`
		}, 3},
		{"reporting", func(t *testing.T, e *env, px *hangingProxy, start func() *proc) (*proc, string) {
			gate := filepath.Join(t.TempDir(), "gate")
			e.enqueue("while [ ! -e " + gate + " ]; do sleep 0.01; done")
			r := start()
			r.waitLine(`job j-1 started`, 1)
			px.hang(`.`)
			require.NoError(t, os.WriteFile(gate, nil, 0o644))
			px.waitHeld(`^POST /jobs/j-1/result$`)
			return r, `^\[T.*\] stopped claiming jobs`
		}, 3},
		{"registering", func(t *testing.T, e *env, px *hangingProxy, start func() *proc) (*proc, string) {
			px.hang(`.`)
			r := start()
			px.waitHeld(`^POST /runners$`)
			return r, `^\[T.*\] notice before registering`
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			px := newHangingProxy(t, e.url)
			start := func() *proc { return e.runner(nil, "-registry", px.url, "-stop-timeout", "2s", "-margin", "1s") }
			r, drainLine := tt.setup(t, e, px, start)
			sent := time.Now()
			r.signal(syscall.SIGTERM)
			began := stamp(t, r.waitLine(drainLine, 1))
			seen := time.Since(sent)
			assert.Equal(t, tt.exit, r.waitExit())
			exited := time.Since(sent)
			t.Logf("%s, registry hung: notice to drain started %v (timeline); SIGTERM to that line read by the test %v; to exit %v",
				tt.name, began, seen.Round(time.Microsecond), exited.Round(time.Millisecond))
			assert.LessOrEqual(t, began, drainStartLimit, "notice to drain started")
			assert.Less(t, exited, 2*time.Second, "exited before the deadline")
		})
	}
}

// The same with a platform notice: the spot interruption is seen by the
// imds source while the runner waits for a claim that the hung registry
// never answers.
func TestSpotNoticeInterruptsAHungClaim(t *testing.T) {
	e := newEnv(t)
	px := newHangingProxy(t, e.url)
	r := e.runner(nil, "-registry", px.url, "-margin", "1s")
	r.waitLine(`ready: runner r-1`, 1)
	px.hang(`.`)
	px.waitHeld(`^POST /runners/r-1/claim$`)
	deadline := time.Now().Add(3 * time.Second)
	e.imds.SetInterruption("terminate", deadline)
	began := stamp(t, r.waitLine(`^\[T.*\] stopped claiming jobs`, 1))
	assert.Equal(t, 3, r.waitExit())
	t.Logf("spot notice, registry hung: notice to drain started %v (timeline); exit %v before the deadline", began, time.Until(deadline).Round(time.Millisecond))
	assert.LessOrEqual(t, began, drainStartLimit)
	assert.True(t, time.Now().Before(deadline), "exited before the deadline")
}

// When the CI service says the registration is gone (someone removed it,
// or its lease lapsed while the runner was cut off), it has re-queued the
// job already: the runner kills its own run of the job at once, so that it
// does not run beside the next, registers again, and goes on.
func TestLostRegistrationRegistersAgain(t *testing.T) {
	e := newEnv(t, "-lease", "600ms") // a heartbeat every 200 ms
	e.enqueue("sleep 30")
	r := e.runner(nil)
	pgid := startedGroup(t, r)

	require.NoError(t, e.c.Remove(t.Context(), "r-1"))
	r.waitLine(`registration r-1 is gone from the CI service`, 1)
	r.waitLine(`job j-1 stopped \(signal: killed\): the CI service has re-queued it already`, 1)
	waitGroupGone(t, pgid)
	r.waitLine(`registered as r-2`, 1)
	r.waitLine(`job j-1 started`, 2)
	j := e.job("j-1")
	assert.Equal(t, registry.JobRunning, j.State)
	assert.Equal(t, "r-2", j.RunnerID)
	assert.Equal(t, 2, j.Attempts)

	r.signal(syscall.SIGTERM)
	assert.Equal(t, 0, r.waitExit())
	assert.Empty(t, e.runners())
	assert.Equal(t, registry.JobQueued, e.job("j-1").State)
}

package ghfake

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(RoleEnv); role != "" {
		// This process is the fake runner's config.sh or listener.
		os.Exit(Main(role, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// wait bounds every wait for something that should happen at once; a
// pass takes far less.
const wait = 20 * time.Second

// testToken is the API token the tests' servers accept.
const testToken = "ghp_ghfakeTESTtoken000000000000000000"

// start starts a server that the test closes.
func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	s, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// client returns a go-github client of s with token, on a transport of its
// own whose connections the test closes.
func client(t *testing.T, s *Server, token string) *github.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := github.NewClient(&http.Client{Transport: tr})
	if token != "" {
		c = c.WithAuthToken(token)
	}
	u, err := c.BaseURL.Parse(s.APIURL())
	require.NoError(t, err)
	c.BaseURL = u
	return c
}

// await waits until cond holds.
func await(t *testing.T, s *Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.Await(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// runDone returns a condition: run id has completed.
func runDone(s *Server, id int64) func() bool {
	return func() bool {
		r, ok := s.Run(id)
		return ok && r.Status == StatusCompleted
	}
}

// jobOn returns a condition: run id's first job is in progress on runner.
func jobOn(s *Server, id, runner int64) func() bool {
	return func() bool {
		r, ok := s.Run(id)
		return ok && r.Jobs[0].Status == StatusInProgress && r.Jobs[0].RunnerID == runner
	}
}

// registrationToken gets a registration token for scope through the API.
func registrationToken(t *testing.T, s *Server, scope string) string {
	t.Helper()
	gh := client(t, s, testToken)
	var tok *github.RegistrationToken
	var err error
	if owner, repo, ok := strings.Cut(scope, "/"); ok {
		tok, _, err = gh.Actions.CreateRegistrationToken(context.Background(), owner, repo)
	} else {
		tok, _, err = gh.Actions.CreateOrganizationRegistrationToken(context.Background(), scope)
	}
	require.NoError(t, err)
	return tok.GetToken()
}

// configureRunner runs config.sh's code in a new directory for a runner
// of scope named name, and returns the directory and the registration.
func configureRunner(t *testing.T, s *Server, scope, name string, extra ...string) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"--unattended", "--url", s.URL() + "/" + scope,
		"--token", registrationToken(t, s, scope), "--name", name}, extra...)
	var out bytes.Buffer
	require.Equal(t, 0, configure(dir, args, nil, &out), out.String())
	var rc runnerConfig
	require.NoError(t, readJSONFile(filepath.Join(dir, runnerFile), &rc))
	return dir, rc.AgentID
}

// A testListener is a listener run in the test's process.
type testListener struct {
	t      *testing.T
	out    *lineBuffer
	cancel context.CancelFunc // as SIGINT is to the real one
	done   chan struct{}
	code   int
}

// startListener runs the listener of the runner in dir until the test
// ends, and waits until it listens.
func startListener(t *testing.T, dir string) *testListener {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &testListener{t: t, out: newLineBuffer(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.code = listen(ctx, dir, l.out)
	}()
	t.Cleanup(func() {
		cancel()
		<-l.done
		if t.Failed() {
			t.Logf("listener's output:\n%s", l.out)
		}
	})
	return l
}

// exit waits for the listener to return, and returns its status.
func (l *testListener) exit() int {
	l.t.Helper()
	select {
	case <-l.done:
		return l.code
	case <-time.After(wait):
		l.t.Fatalf("the listener has not exited after %v; its output:\n%s", wait, l.out)
		return -1
	}
}

// A lineBuffer keeps what a process writes, and lets a test wait for a
// line without sleeping.
type lineBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLineBuffer() *lineBuffer { return &lineBuffer{changed: make(chan struct{})} }

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return len(p), nil
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// await waits until the output contains sub.
func (b *lineBuffer) await(t *testing.T, sub string) {
	t.Helper()
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for {
		b.mu.Lock()
		changed, text := b.changed, b.buf.String()
		b.mu.Unlock()
		if strings.Contains(text, sub) {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("no %q after %v in:\n%s", sub, wait, text)
		}
	}
}

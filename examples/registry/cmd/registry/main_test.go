//go:build unix

package main_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/examples/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit bounds every wait for the child; the child normally answers in
// milliseconds.
const waitLimit = 15 * time.Second

// build compiles this command into t.TempDir().
func build(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the binary with:", err)
	}
	bin := filepath.Join(t.TempDir(), "registry")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// proc is a running registry binary.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stderr bytes.Buffer // read only after exited has delivered
	exited chan error   // Wait's result, once
}

// start runs bin with args and returns once it has printed its first line.
// The first line is returned in p.url (as the whole line if it is not the
// expected one); if the child exits first, p.url is "".
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), exited: make(chan error, 1)}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())

	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		line := ""
		if sc.Scan() {
			line = sc.Text()
		}
		first <- line
		io.Copy(io.Discard, stdout)
		// Wait closes stdout: only once every read is done.
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill() // an error here means it has exited already
		select {
		case <-p.exited:
		case <-time.After(waitLimit):
			t.Error("registry did not exit after SIGKILL")
		}
	})

	select {
	case line := <-first:
		url, ok := strings.CutPrefix(line, "registry: listening on ")
		if !ok {
			url = line
		}
		p.url = url
	case <-time.After(waitLimit):
		t.Fatal("registry printed nothing")
	}
	return p
}

// stop sends sig and returns stderr and the exit error (nil for status 0).
func (p *proc) stop(t *testing.T, sig os.Signal) (string, error) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	return p.wait(t)
}

// wait waits for the child to exit and returns stderr and the exit error.
func (p *proc) wait(t *testing.T) (string, error) {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		return p.stderr.String(), err
	case <-time.After(waitLimit):
		t.Fatal("registry did not exit")
		return "", nil
	}
}

func newClient(t *testing.T, url string) *registry.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return registry.NewClient(url, &http.Client{Transport: tr, Timeout: waitLimit})
}

func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := build(t)
	state := filepath.Join(t.TempDir(), "registry.json")
	args := []string{"-listen", "127.0.0.1:0", "-state", state}

	// First run: some state, then SIGTERM. With no -admin-token-file, the
	// admin token is created beside the state file, for its owner only.
	p := start(t, bin, args...)
	require.True(t, strings.HasPrefix(p.url, "http://127.0.0.1:"), "first line: %q", p.url)
	tokenFile := state + ".admin-token"
	fi, err := os.Stat(tokenFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	b, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	adminToken := strings.TrimSpace(string(b))
	require.NotEmpty(t, adminToken)
	c := newClient(t, p.url)
	admin := c.WithToken(adminToken)
	ctx := t.Context()
	_, err = c.Enqueue(ctx, "echo nobody")
	require.ErrorIs(t, err, registry.ErrUnauthorized, "enqueueing takes the admin token")
	_, err = c.Register(ctx, "stranger", nil)
	require.ErrorIs(t, err, registry.ErrUnauthorized, "registering takes the join token")
	fi, err = os.Stat(state + ".join-token")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	b, err = os.ReadFile(state + ".join-token")
	require.NoError(t, err)
	joinToken := strings.TrimSpace(string(b))
	require.NotEmpty(t, joinToken)
	r, err := c.WithToken(joinToken).Register(ctx, "ci-1", []string{"linux"})
	require.NoError(t, err)
	for _, cmd := range []string{"echo one", "echo two"} {
		_, err := admin.Enqueue(ctx, cmd)
		require.NoError(t, err)
	}
	job, err := c.WithToken(r.Token).Claim(ctx, r.ID)
	require.NoError(t, err)
	require.NotNil(t, job)
	runners, err := c.Runners(ctx, "")
	require.NoError(t, err)
	_, err = c.Jobs(ctx)
	require.ErrorIs(t, err, registry.ErrUnauthorized, "reading jobs takes the admin token")
	jobs, err := admin.Jobs(ctx)
	require.NoError(t, err)

	logs, err := p.stop(t, syscall.SIGTERM)
	require.NoError(t, err, "exit status after SIGTERM; stderr:\n%s", logs)
	assert.Contains(t, logs, "runner registered")
	assert.Contains(t, logs, "job claimed")
	assert.Contains(t, logs, "path=/runners/r-1/claim status=200")
	assert.Contains(t, logs, "shutting down")
	assert.Contains(t, logs, "admin token created")
	assert.Contains(t, logs, "join token created")
	assert.Contains(t, logs, tokenFile)
	assert.NotContains(t, logs, adminToken, "tokens are never logged")
	assert.NotContains(t, logs, joinToken, "tokens are never logged")
	assert.NotContains(t, logs, r.Token, "tokens are never logged")

	// Second run on the same file: the same state and admin token, new ids
	// after the old ones, the old runner's token still its own; then
	// SIGINT.
	p = start(t, bin, append(args, "-admin-token-file", tokenFile)...)
	require.True(t, strings.HasPrefix(p.url, "http://127.0.0.1:"), "first line: %q", p.url)
	c = newClient(t, p.url)
	runners2, err := c.Runners(ctx, "")
	require.NoError(t, err)
	jobs2, err := c.WithToken(adminToken).Jobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, runners, runners2)
	assert.Equal(t, jobs, jobs2)
	_, err = c.WithToken(adminToken).Enqueue(ctx, "echo three")
	require.NoError(t, err)
	r2, err := c.WithToken(joinToken).Register(ctx, "ci-1", nil)
	require.NoError(t, err)
	assert.Equal(t, "r-2", r2.ID)
	done, err := c.WithToken(r.Token).Report(ctx, job.ID, registry.Result{RunnerID: r.ID, State: registry.JobSucceeded})
	require.NoError(t, err)
	assert.Equal(t, registry.JobSucceeded, done.State)

	logs, err = p.stop(t, syscall.SIGINT)
	require.NoError(t, err, "exit status after SIGINT; stderr:\n%s", logs)
}

func TestBinaryCorruptState(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := build(t)
	state := filepath.Join(t.TempDir(), "registry.json")
	require.NoError(t, os.WriteFile(state, []byte("{oops"), 0o600))

	p := start(t, bin, "-listen", "127.0.0.1:0", "-state", state)
	assert.Empty(t, p.url, "no listening line")
	logs, err := p.wait(t)
	var exitErr *exec.ExitError
	require.True(t, errors.As(err, &exitErr), "exit error: %v", err)
	assert.Equal(t, 1, exitErr.ExitCode())
	assert.Contains(t, logs, state)
	assert.Contains(t, logs, "corrupt")
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/imds/imdstest"
)

// TestSourceThatCannotWorkIsFatal: a source whose configuration can never
// work (an interval below imds.FloorInterval, an endpoint that is not a
// URL) stops kubedrain at start, rather than leaving it running, healthy
// to Kubernetes, with nothing to watch.
func TestSourceThatCannotWorkIsFatal(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		args     []string
	}{
		{"http://127.0.0.1:1", []string{"--imds-interval", "5ms"}},
		{"http://127.0.0.1:1", []string{"--imds-advisory-interval", "1ms"}},
		{"169.254.169.254", nil}, // no scheme
	} {
		t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", tc.endpoint)
		args := append([]string{"--node", "n", "--sources", "imds"}, tc.args...)
		o, err := parseFlags(args, &strings.Builder{})
		if err != nil {
			continue // rejected with the flags: fine
		}
		_, err = o.pickSources(slog.New(slog.DiscardHandler))
		assert.Error(t, err, "%s %q: kubedrain starts with an imds source that can never work", tc.endpoint, tc.args)
	}
}

// TestWatchStartsWhileAPIServerHangs: an API server that does not answer
// at start (overloaded, a load balancer that holds connections) does not
// keep kubedrain from watching for notices: checkNode holds up the
// notifier for up to its 30 s.
func TestWatchStartsWhileAPIServerHangs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: TLS handshakes hang
	require.NoError(t, err)
	defer l.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, l.Addr())), 0o600))
	srv := imdstest.NewServer()
	defer srv.Close()
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	bin, err := buildKubedrain()
	require.NoError(t, err)
	cmd := exec.Command(bin, "--node", testNode, "--kubeconfig", kc, "--sources", "imds", "--imds-interval", "20ms")
	cmd.Env = append(os.Environ(), "AWS_EC2_METADATA_SERVICE_ENDPOINT="+srv.URL)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	assert.NoError(t, srv.AwaitRequests(ctx, imdstest.PathInstanceAction, 1),
		"IMDS not polled within 5 s of the start: the notices wait for checkNode")
}

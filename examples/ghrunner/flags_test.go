//go:build unix

package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/signal"
)

func TestParseFlags(t *testing.T) {
	t.Setenv(tokenEnv, "ghp_secret")
	t.Setenv(allowRootEnv, "1")
	o, err := parseFlags([]string{"-repo", "acme/app", "-runner-dir", "/opt/r", "-name", "spot-1"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "acme", o.owner)
	assert.Equal(t, "app", o.repo)
	assert.Equal(t, "https://api.github.com/", o.apiURL.String())
	assert.Equal(t, "https://github.com/acme/app", o.configURL)
	assert.Equal(t, "ghp_secret", mustToken(t, o))
	assert.False(t, o.rerunAll)
	assert.Equal(t, time.Hour, o.maxHold, "-max-hold's default")

	o, err = parseFlags([]string{"-org", "acme", "-url", "https://ghe.example.com/api/v3", "-runner-dir", "/opt/r", "-rerun", "all"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "https://ghe.example.com/api/v3/", o.apiURL.String())
	assert.Equal(t, "https://ghe.example.com/acme", o.configURL)
	assert.True(t, o.rerunAll)

	o, err = parseFlags([]string{"-repo", "acme/app", "-runner-dir", "/opt/r", "-max-hold", "0"}, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, o.maxHold, "-max-hold 0: a held termination hands the job back at once")

	o, err = parseFlags([]string{"-repo", "acme/app", "-runner-dir", "/opt/r",
		"--metrics-bind-address", ":9090", "-health-probe-bind-address", ":8081",
		"--webhook-url-file", "/run/secrets/hook", "--webhook-header", "Authorization: Bearer x", "--webhook-header", "X-A: b", "--webhook-advice"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, ":9090", o.ops.MetricsAddr, "Go's flags take - or --")
	assert.Equal(t, ":8081", o.ops.ProbeAddr)
	assert.Equal(t, "/run/secrets/hook", o.ops.Webhook.URLFile)
	assert.Equal(t, []string{"Authorization: Bearer x", "X-A: b"}, o.ops.Webhook.Headers)
	assert.True(t, o.ops.Webhook.Advice)
}

func TestParseFlagsRejects(t *testing.T) {
	t.Setenv(tokenEnv, "ghp_secret")
	t.Setenv(allowRootEnv, "1")
	for _, args := range [][]string{
		{"-runner-dir", "/r"}, // neither -repo nor -org
		{"-repo", "a/b", "-org", "a", "-runner-dir", "/r"},
		{"-repo", "a", "-runner-dir", "/r"},
		{"-repo", "a/b/c", "-runner-dir", "/r"},
		{"-repo", "a/b"}, // no -runner-dir
		{"-repo", "a/b", "-runner-dir", "/r", "-name", "two words"},
		{"-repo", "a/b", "-runner-dir", "/r", "-rerun", "some"},
		{"-repo", "a/b", "-runner-dir", "/r", "-margin", "2m"},
		{"-repo", "a/b", "-runner-dir", "/r", "-poll", "0s"},
		{"-repo", "a/b", "-runner-dir", "/r", "-max-hold", "-1s"},
		{"-repo", "a/b", "-runner-dir", "/r", "-url", "ftp://x/"},
		{"-repo", "a/b", "-runner-dir", "/r", "-url", "https://user:pw@x/api/v3/"},
		{"-repo", "a/b", "-runner-dir", "/r", "-url", "https://proxy.example.com/github/"}, // no web URL to derive
		{"-repo", "a/b", "-runner-dir", "/r", "extra"},
	} {
		_, err := parseFlags(args, io.Discard)
		assert.Error(t, err, "%q", args)
	}
}

func TestToken(t *testing.T) {
	t.Setenv(tokenEnv, "")
	t.Setenv(allowRootEnv, "1")
	_, err := parseFlags([]string{"-repo", "a/b", "-runner-dir", "/r"}, io.Discard)
	assert.ErrorContains(t, err, "no API token")

	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(file, []byte("ghp_fromfile\n"), 0o600))
	o, err := parseFlags([]string{"-repo", "a/b", "-runner-dir", "/r", "-token-file", file}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "ghp_fromfile", mustToken(t, o))

	// A renewed token (a GitHub App's lasts an hour) is read again.
	require.NoError(t, os.WriteFile(file, []byte("ghs_renewed-token\n"), 0o600))
	require.NoError(t, os.Chtimes(file, time.Now(), time.Now().Add(time.Minute)))
	assert.Equal(t, "ghs_renewed-token", mustToken(t, o))
	// One that cannot be read keeps the last good one, with the error.
	require.NoError(t, os.WriteFile(file, []byte(""), 0o600))
	require.NoError(t, os.Chtimes(file, time.Now(), time.Now().Add(2*time.Minute)))
	tok, err := o.token.get()
	assert.Error(t, err)
	assert.Equal(t, "ghs_renewed-token", tok)

	require.NoError(t, os.WriteFile(file, []byte("ghp_a ghp_b"), 0o600))
	_, err = parseFlags([]string{"-repo", "a/b", "-runner-dir", "/r", "-token-file", file}, io.Discard)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "ghp_a", "the error must not show the token")

	require.NoError(t, os.WriteFile(file, bytes.Repeat([]byte("x"), maxToken+1), 0o600))
	_, err = parseFlags([]string{"-repo", "a/b", "-runner-dir", "/r", "-token-file", file}, io.Discard)
	assert.ErrorContains(t, err, "not a token")
}

func TestRootNeedsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("run the tests as root (CI does)")
	}
	t.Setenv(tokenEnv, "ghp_secret")
	t.Setenv(allowRootEnv, "")
	_, err := parseFlags([]string{"-repo", "a/b", "-runner-dir", "/r"}, io.Discard)
	assert.ErrorContains(t, err, "give -user")
	o, err := parseFlags([]string{"-repo", "a/b", "-runner-dir", "/r", "-user", "nobody"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "nobody", o.runAs.Name)
}

func mustToken(t *testing.T, o *options) string {
	t.Helper()
	tok, err := o.token.get()
	require.NoError(t, err)
	return tok
}

func TestPlainHTTPOnlyOnLoopback(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080/api/v3/", "http://[::1]/api/v3/", "http://localhost:1/api/v3/", "https://ghe.example.com/api/v3/"} {
		_, err := parseAPIURL(ok)
		assert.NoError(t, err, ok)
	}
	_, err := parseAPIURL("http://ghe.example.com/api/v3/")
	assert.ErrorContains(t, err, "in clear")
}

func TestWebURL(t *testing.T) {
	for api, want := range map[string]string{
		"https://api.github.com/":          "https://github.com/o/r",
		"https://api.acme.ghe.com/":        "https://acme.ghe.com/o/r",
		"https://ghe.example.com/api/v3/":  "https://ghe.example.com/o/r",
		"http://127.0.0.1:8080/api/v3/":    "http://127.0.0.1:8080/o/r",
		"https://x.example.com/gh/api/v3/": "https://x.example.com/gh/o/r",
	} {
		u, err := url.Parse(api)
		require.NoError(t, err)
		got, err := webURL(u, "o/r")
		require.NoError(t, err, api)
		assert.Equal(t, want, got, api)
	}
}

func TestSourcesHoldOneSignalSource(t *testing.T) {
	for _, spec := range []string{"imds", "imds,signal", "signal", "auto"} {
		srcs, err := pickSources(&options{sources: spec}, slog.New(slog.DiscardHandler))
		require.NoError(t, err, spec)
		n := 0
		for _, s := range srcs {
			if s.Name() == signal.Name {
				n++
			}
		}
		assert.Equal(t, 1, n, "-sources %s", spec)
	}
}

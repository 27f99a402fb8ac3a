//go:build unix

package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/internal/backoff"
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

	o, err = parseFlags([]string{"-org", "acme", "-url", "https://ghe.example.com/api/v3", "-runner-dir", "/opt/r", "-rerun", "all"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "https://ghe.example.com/api/v3/", o.apiURL.String())
	assert.Equal(t, "https://ghe.example.com/acme", o.configURL)
	assert.True(t, o.rerunAll)
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
	assert.Equal(t, "nobody", o.runAs.name)
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

// A .runner as actions/runner 2.329 writes it: UTF-8 with a byte order
// mark, indented.
const realRunnerFile = "\xef\xbb\xbf{\n  \"agentId\": 42,\n  \"agentName\": \"spot-1\",\n  \"poolId\": 1,\n  \"poolName\": \"Default\",\n  \"serverUrl\": \"https://pipelinesghubeus2.actions.githubusercontent.com/abc/\",\n  \"gitHubUrl\": \"https://github.com/acme/app\",\n  \"workFolder\": \"_work\"\n}"

func TestParseRegistration(t *testing.T) {
	r, err := parseRegistration([]byte(realRunnerFile))
	require.NoError(t, err)
	assert.Equal(t, &registration{ID: 42, Name: "spot-1", URL: "https://github.com/acme/app"}, r)
	for _, bad := range []string{"", "{}", `{"agentId": -1}`, `{"agentId": "42"}`, "\xef\xbb\xbf[", `{"agentId": 1e99}`} {
		_, err := parseRegistration([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
	_, err = parseRegistration(bytes.Repeat([]byte(" "), maxRunnerFile+1))
	assert.ErrorContains(t, err, "larger than")
}

func FuzzParseRegistration(f *testing.F) {
	f.Add([]byte(realRunnerFile))
	f.Add([]byte(`{"agentId": 7, "agentName": "x", "ephemeral": true}`))
	f.Add([]byte("\xef\xbb\xbf{\"agentId\": 9007199254740993}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRegistration(b)
		if err == nil && r.ID <= 0 {
			t.Fatalf("accepted agentId %d", r.ID)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	b := &backoff.Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	reset := time.Now().Add(3 * time.Second)
	wait, why := retryAfter(nil, &github.RateLimitError{Rate: github.Rate{Reset: github.Timestamp{Time: reset}}}, b)
	assert.Equal(t, "rate limited", why)
	assert.InDelta(t, 3*time.Second+rateLimitSlack, wait, float64(100*time.Millisecond))

	ra := 2 * time.Second
	wait, why = retryAfter(nil, &github.AbuseRateLimitError{RetryAfter: &ra}, b)
	assert.Equal(t, "secondary rate limit", why)
	assert.Equal(t, ra+rateLimitSlack, wait)
	wait, _ = retryAfter(nil, &github.AbuseRateLimitError{}, b)
	assert.Equal(t, secondaryWait, wait)

	resp := func(code int, h ...string) error {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		for i := 0; i+1 < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return &github.ErrorResponse{Response: r}
	}
	wait, why = retryAfter(nil, resp(429, "Retry-After", "4"), b)
	assert.Equal(t, "rate limited", why)
	assert.Equal(t, 4*time.Second+rateLimitSlack, wait)
	_, why = retryAfter(nil, resp(429), b)
	assert.Equal(t, "rate limited", why)
	wait, why = retryAfter(nil, resp(403, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10)), b)
	assert.Equal(t, "rate limited", why)
	assert.Greater(t, wait, time.Second)
	_, why = retryAfter(nil, resp(502), b)
	assert.Equal(t, "HTTP 502", why)
	for _, code := range []int{400, 401, 403, 404, 409, 422} {
		_, why = retryAfter(nil, resp(code), b)
		assert.Empty(t, why, "HTTP %d is final", code)
	}
	_, why = retryAfter(nil, errors.New("connection refused"), b)
	assert.Equal(t, "no answer", why)
}

func TestLimitedBody(t *testing.T) {
	b := &limitedBody{rc: io.NopCloser(strings.NewReader(strings.Repeat("x", maxBody)))}
	n, err := io.Copy(io.Discard, b)
	require.NoError(t, err, "exactly maxBody is fine")
	assert.EqualValues(t, maxBody, n)
	b = &limitedBody{rc: io.NopCloser(io.MultiReader(strings.NewReader(strings.Repeat("x", maxBody)), strings.NewReader("y")))}
	_, err = io.Copy(io.Discard, b)
	assert.ErrorIs(t, err, errBodyTooLarge)
}

func TestChildIsNotFooledByAJobsName(t *testing.T) {
	c := &child{changed: make(chan struct{}, 1)}
	c.copyOutput(strings.NewReader(
		"2026-11-30 18:00:05Z: Running job: Running job: x\n"+
			"2026-11-30 18:00:06Z: Job Running job: x completed with result: Succeeded\n"+
			"Running job: not the listener's line\n"), io.Discard)
	busy, _, ended := c.state()
	assert.False(t, busy)
	assert.Equal(t, 1, ended)
	assert.Equal(t, 1, c.jobsStarted())
}

// The listener's lines, as actions/runner 2.329 prints them.
const listenerOutput = `√ Connected to GitHub

Current runner version: '2.329.0'
2026-11-30 18:00:00Z: Listening for Jobs
2026-11-30 18:00:05Z: Running job: build (ubuntu, 1.26)
`

func TestChildFollowsJobs(t *testing.T) {
	c := &child{changed: make(chan struct{}, 1)}
	var out bytes.Buffer
	c.copyOutput(strings.NewReader(listenerOutput), &out)
	assert.Equal(t, listenerOutput, out.String(), "copied as it is")
	busy, job, ended := c.state()
	assert.True(t, busy)
	assert.Equal(t, "build (ubuntu, 1.26)", job)
	assert.Zero(t, ended)

	c.copyOutput(strings.NewReader("2026-11-30 18:01:00Z: Job build (ubuntu, 1.26) completed with result: Canceled\n"), io.Discard)
	busy, _, ended = c.state()
	assert.False(t, busy)
	assert.Equal(t, 1, ended)
}

func TestChildLongLines(t *testing.T) {
	c := &child{changed: make(chan struct{}, 1)}
	// A job's name is not this long; a line that is, is copied whole and
	// its tail is not mistaken for a line of its own.
	long := strings.Repeat("x", 3*maxLine) + "Running job: fake\n"
	var out bytes.Buffer
	c.copyOutput(strings.NewReader(long+"no newline at the end"), &out)
	assert.Equal(t, long+"no newline at the end", out.String())
	busy, _, _ := c.state()
	assert.False(t, busy)
}

func TestRunNotRerunPastMaxAttempts(t *testing.T) {
	g := &ghrunner{o: &options{maxAttempts: 5}, log: slog.New(slog.DiscardHandler)}
	// g.api is nil: a call would panic.
	assert.NoError(t, g.rerunRun(t.Context(), &jobRef{run: 1, attempt: 5}))
}

func TestRepoNamesFromTheAPIAreChecked(t *testing.T) {
	for _, ok := range []string{"app", "my.repo", "a-b_c", ".github"} {
		assert.True(t, repoName.MatchString(ok), ok)
	}
	for _, bad := range []string{"", "a/b", "..%2f", "a?b", "a#b", "a b", strings.Repeat("x", 101)} {
		assert.False(t, repoName.MatchString(bad), bad)
	}
}

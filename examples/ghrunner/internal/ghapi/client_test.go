package ghapi

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/internal/backoff"
)

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

func TestRepoNamesFromTheAPIAreChecked(t *testing.T) {
	for _, ok := range []string{"app", "my.repo", "a-b_c", ".github"} {
		assert.True(t, repoName.MatchString(ok), ok)
	}
	for _, bad := range []string{"", "a/b", "..%2f", "a?b", "a#b", "a b", strings.Repeat("x", 101)} {
		assert.False(t, repoName.MatchString(bad), bad)
	}
}

func TestConflictAndBusyAnswersAreNamed(t *testing.T) {
	answer := func(code int) error {
		return &github.ErrorResponse{Response: &http.Response{StatusCode: code}}
	}
	assert.ErrorIs(t, completedErr(answer(http.StatusConflict)), ErrRunCompleted)
	assert.NotErrorIs(t, completedErr(answer(http.StatusNotFound)), ErrRunCompleted)
	assert.NoError(t, completedErr(nil))
}

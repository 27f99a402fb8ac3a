// Package ghapi is the part of GitHub's REST API that ghrunner uses, for
// the repository or organisation of its runner: registration tokens,
// runners, and the workflow runs and jobs a runner ran. Every call is
// retried on 5xx, on network errors and on rate limits (waiting as long as
// GitHub asks), for as long as its context allows, and its error names the
// step. A call that would have to wait past its context's deadline gives up
// at once.
package ghapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/go-github/v75/github"

	"github.com/termsig/termsig/internal/backoff"
)

// Config is what a Client needs. BaseURL and Token are required.
type Config struct {
	// BaseURL is the REST API's base, with a trailing slash:
	// https://api.github.com/ or https://HOST/api/v3/.
	BaseURL *url.URL
	// Token returns the API token; it is called for every request to
	// BaseURL's scheme and host, and for no other. A request whose token
	// is "" fails with Token's error.
	Token func() (string, error)
	// Owner and Repo name the repository the runner serves; or Org the
	// organisation.
	Owner, Repo, Org string
	// RunnerName is the runner's name: every runner ghrunner deals with
	// has it.
	RunnerName string
	// CallTimeout bounds one try of one request; zero means 10 s.
	CallTimeout time.Duration
	// Logger logs the retries; nil means none.
	Logger *slog.Logger
}

// A Client calls GitHub's API for one runner's repository or
// organisation. It is safe for concurrent use.
type Client struct {
	gh          *github.Client
	owner, repo string
	org         string
	runnerName  string
	callTimeout time.Duration
	log         *slog.Logger
	// retry is the backoff for 5xx and network errors.
	retry backoff.Backoff
}

// maxBody bounds what is read of one response: a run's jobs are the
// largest answer ghrunner asks for, well under 1 MiB at 100 per page.
const maxBody = 8 << 20

// New returns a Client for cfg.
func New(cfg Config) *Client {
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = cfg.CallTimeout
	hc := &http.Client{
		Transport:     &authTransport{base: limitedBodies{tr}, api: cfg.BaseURL, token: cfg.Token},
		CheckRedirect: sameOrigin,
	}
	gh := github.NewClient(hc)
	gh.BaseURL = cfg.BaseURL
	gh.UserAgent = "termsig-ghrunner"
	return &Client{
		gh: gh, owner: cfg.Owner, repo: cfg.Repo, org: cfg.Org, runnerName: cfg.RunnerName,
		callTimeout: cfg.CallTimeout, log: cfg.Logger,
		retry: backoff.Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second, Jitter: true},
	}
}

// An authTransport adds the token to requests for the API's own scheme and
// host, and to no other: not to where a redirect leads.
type authTransport struct {
	base  http.RoundTripper
	api   *url.URL
	token func() (string, error)
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != t.api.Scheme || req.URL.Host != t.api.Host {
		return t.base.RoundTrip(req)
	}
	tok, err := t.token()
	if tok == "" {
		if err == nil {
			err = errors.New("no API token")
		}
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	return t.base.RoundTrip(req)
}

// sameOrigin follows a redirect only within the same scheme and host, as
// GitHub's own are (a renamed repository); the token never leaves it.
func sameOrigin(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case len(via) >= 10:
		return errors.New("stopped after 10 redirects")
	case req.URL.Scheme != first.Scheme || req.URL.Host != first.Host:
		return fmt.Errorf("redirect to %s://%s refused: the API token stays with %s", req.URL.Scheme, req.URL.Host, first.Host)
	}
	return nil
}

// limitedBodies cuts every response body at maxBody bytes: a server that
// sends more makes the call fail, never ghrunner's memory grow.
type limitedBodies struct{ base http.RoundTripper }

func (l limitedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err == nil {
		resp.Body = &limitedBody{rc: resp.Body}
	}
	return resp, err
}

type limitedBody struct {
	rc   io.ReadCloser
	read int64
}

var errBodyTooLarge = fmt.Errorf("response body larger than %d bytes", maxBody)

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.read > maxBody {
		return 0, errBodyTooLarge
	}
	n, err := b.rc.Read(p)
	if b.read += int64(n); b.read > maxBody {
		return n, errBodyTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// call runs one API request, f, until it succeeds, fails for good, or
// ctx ends; step names what it is for, in errors and logs. Each try gets
// at most callTimeout. A rate limit is waited out when it ends before
// ctx's deadline; when it ends later, call gives up at once, saying so.
func (c *Client) call(ctx context.Context, step string, f func(context.Context) (*github.Response, error)) error {
	b := c.retry
	for try := 1; ; try++ {
		cctx, cancel := context.WithTimeout(ctx, c.callTimeout)
		resp, err := f(cctx)
		cancel()
		var accepted *github.AcceptedError
		if err == nil || errors.As(err, &accepted) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", step, err)
		}
		wait, why := retryAfter(resp, err, &b)
		if why == "" {
			return fmt.Errorf("%s: %w", step, err)
		}
		if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
			return fmt.Errorf("%s: %w (%s: the next try, in %v, would be after the deadline)", step, err, why, wait.Round(time.Millisecond))
		}
		c.log.Warn("ghrunner: API call failed; trying again", "step", step, "try", try, "why", why, "in", wait.Round(time.Millisecond), "err", err)
		if !backoff.Sleep(ctx, wait) {
			return fmt.Errorf("%s: %w (given up waiting to try again: %w)", step, err, context.Cause(ctx))
		}
	}
}

// rateLimitSlack is added to a rate limit's reset time, which GitHub
// gives in whole seconds.
const rateLimitSlack = 250 * time.Millisecond

// secondaryWait is how long a secondary rate limit without Retry-After is
// waited out: "at least one minute", GitHub's documentation says.
const secondaryWait = time.Minute

// retryAfter says how long to wait before trying a failed request again
// and why; an empty why means not to try again.
func retryAfter(resp *github.Response, err error, b *backoff.Backoff) (time.Duration, string) {
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	var er *github.ErrorResponse
	switch {
	case errors.As(err, &rl):
		return max(time.Until(rl.Rate.Reset.Time), 0) + rateLimitSlack, "rate limited"
	case errors.As(err, &abuse):
		if abuse.RetryAfter != nil {
			return max(*abuse.RetryAfter, 0) + rateLimitSlack, "secondary rate limit"
		}
		return secondaryWait, "secondary rate limit"
	case errors.As(err, &er) && er.Response != nil:
		return statusRetry(er.Response, b)
	case resp != nil && resp.Response != nil:
		return statusRetry(resp.Response, b)
	default: // no answer: network error, timeout, a body cut short
		return b.Next(), "no answer"
	}
}

// statusRetry handles an error answer that go-github did not recognise as
// a rate limit: 429 and a 403 with Retry-After or x-ratelimit-reset are
// one anyway; 5xx is retried with backoff; anything else is final.
func statusRetry(r *http.Response, b *backoff.Backoff) (time.Duration, string) {
	code := r.StatusCode
	if code == http.StatusTooManyRequests || code == http.StatusForbidden {
		if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err == nil && s >= 0 {
			return time.Duration(s)*time.Second + rateLimitSlack, "rate limited"
		}
		if r.Header.Get("X-RateLimit-Remaining") == "0" {
			if s, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
				return max(time.Until(time.Unix(s, 0)), 0) + rateLimitSlack, "rate limited"
			}
		}
		if code == http.StatusTooManyRequests {
			return max(b.Next(), time.Second), "rate limited"
		}
	}
	if code >= 500 {
		return b.Next(), "HTTP " + strconv.Itoa(code)
	}
	return 0, ""
}

// status returns the HTTP status of GitHub's error answer err, 0 if err
// is not one.
func status(err error) int {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

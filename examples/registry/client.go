package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to a registry. Its methods are safe for concurrent use.
//
// Registering takes the join token (or the admin token); a runner's own
// requests (Claim, Heartbeat, Report, Remove of itself, Job of its own jobs)
// take its token; enqueueing, listing jobs and removing other runners take
// the admin token: see [Client.WithToken].
//
// A non-2xx answer is returned as an [*APIError] (see [ErrNotFound] and
// [ErrConflict]). Any other error, such as a refused connection, a timeout
// or an answer that is not the API's JSON, is returned wrapped with a
// "registry: " prefix, so that errors.As(err, new(*APIError)) tells "the
// registry said no" from "the registry could not be reached".
type Client struct {
	base  string
	hc    *http.Client
	token string // sent as "Authorization: Bearer"; never logged nor put in errors
}

// NewClient returns a Client for the registry at baseURL, such as
// "http://127.0.0.1:8321". A nil hc means an [http.Client] with a 5 s
// timeout.
func NewClient(baseURL string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), hc: hc}
}

// WithToken returns a Client that presents token with each request: the
// join token, a runner's own token (from [Registration]) or the admin
// token. c is not changed.
func (c *Client) WithToken(token string) *Client {
	cc := *c
	cc.token = token
	return &cc
}

// Register registers a runner and returns its registration, with the
// token that its later requests need; it takes the join token or the admin
// token. Names need not be unique: the token, not the name, identifies the
// registration.
func (c *Client) Register(ctx context.Context, name string, labels []string) (Registration, error) {
	if labels == nil {
		labels = []string{}
	}
	var r Registration
	_, err := c.do(ctx, http.MethodPost, "/runners", map[string]any{"name": name, "labels": labels}, &r)
	return r, err
}

// Runners lists the registered runners by id; a name other than "" lists
// only those of that name.
func (c *Client) Runners(ctx context.Context, name string) ([]Runner, error) {
	path := "/runners"
	if name != "" {
		path += "?" + url.Values{"name": {name}}.Encode()
	}
	var rs []Runner
	_, err := c.do(ctx, http.MethodGet, path, nil, &rs)
	return rs, err
}

// Remove unregisters a runner; it takes the runner's token or the admin
// token. If it was running a job, that job goes back to the queue. It fails
// with [ErrNotFound] if there is no such runner.
func (c *Client) Remove(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/runners/"+url.PathEscape(id), nil, nil)
	return err
}

// Heartbeat renews the runner's lease; it takes the runner's token. It
// fails with [ErrNotFound] if the runner is no longer registered.
func (c *Client) Heartbeat(ctx context.Context, runnerID string) error {
	_, err := c.do(ctx, http.MethodPost, "/runners/"+url.PathEscape(runnerID)+"/heartbeat", nil, nil)
	return err
}

// Claim gives the runner the oldest queued job, or returns nil, nil if no
// job is queued; it takes the runner's token and renews its lease. It fails
// with [ErrNotFound] for an unknown runner (never registered, removed, or
// its lease lapsed) and with [ErrConflict] if the runner is running a job
// already.
func (c *Client) Claim(ctx context.Context, runnerID string) (*Job, error) {
	var j Job
	status, err := c.do(ctx, http.MethodPost, "/runners/"+url.PathEscape(runnerID)+"/claim", nil, &j)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return &j, nil
}

// Report tells how the running attempt at a job ended and returns the job
// as it is now: succeeded or failed, or queued again if r.State is
// [JobInterrupted]. It takes the token of r.RunnerID. It fails with
// [ErrNotFound] if that runner is gone, and with [ErrConflict] if the job is
// not running on it.
func (c *Client) Report(ctx context.Context, jobID string, r Result) (Job, error) {
	var j Job
	_, err := c.do(ctx, http.MethodPost, "/jobs/"+url.PathEscape(jobID)+"/result", r, &j)
	return j, err
}

// Enqueue queues a job that runs command with sh -c; it takes the admin
// token.
func (c *Client) Enqueue(ctx context.Context, command string) (Job, error) {
	var j Job
	_, err := c.do(ctx, http.MethodPost, "/jobs", map[string]string{"command": command}, &j)
	return j, err
}

// Jobs lists all jobs, oldest first; it takes the admin token.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	var js []Job
	_, err := c.do(ctx, http.MethodGet, "/jobs", nil, &js)
	return js, err
}

// Job returns one job, or fails with [ErrNotFound]; it takes the admin
// token, or the token of a runner that runs the job or ran it.
func (c *Client) Job(ctx context.Context, id string) (Job, error) {
	var j Job
	_, err := c.do(ctx, http.MethodGet, "/jobs/"+url.PathEscape(id), nil, &j)
	return j, err
}

// do sends in (if not nil) as JSON and decodes a 200 or 201 answer into out
// (if not nil). It returns the status of a 2xx answer.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("registry: %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, fmt.Errorf("registry: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("registry: %w", err) // already names the method and URL
	}
	defer resp.Body.Close()
	// Read to the end (within reason) so that the connection can be reused.
	defer io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, readAPIError(resp)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return 0, fmt.Errorf("registry: %s %s: decoding the answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func readAPIError(resp *http.Response) *APIError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &APIError{Status: resp.StatusCode, Message: msg}
}

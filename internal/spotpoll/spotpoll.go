// Package spotpoll is what the sources of the clouds that post a spot
// instance's termination time on one metadata path (alibaba, tencent)
// share. A [Spec] says what makes one cloud's source; with the [Settings]
// of its Config it is the source's Available and Watch: the checks of the
// Config, the HTTP client, guarded as every metadata source's is (see
// package httpguard), and the poll loop.
//
// A path answers 404 while nothing is scheduled and the time once the
// instance is to go. The first time is a Terminate notice with that time
// as its Deadline; a time earlier than the one reported is a Terminate
// again, with the earlier Deadline; a later one, or the same, is no news.
// A 404 after a notice is a Cleared notice for the same Event. Anything
// else (an error status, a network error, a body that is not a time, a
// time more than an hour past or a day ahead) is an error that the poller
// reports with health and retries with backoff: it never makes or clears
// a notice.
package spotpoll

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
	"github.com/termsig/termsig/internal/health"
	"github.com/termsig/termsig/internal/host"
	"github.com/termsig/termsig/internal/httpguard"
)

// A Spec is what makes a source of one cloud: its names, where its
// metadata service is, how the firmware names its hosts, and how to read
// its termination time.
type Spec struct {
	Name            string // the source's, such as "alibaba"; its errors start "alibaba: "
	Host            string // what it runs on, for messages, such as "an ECS instance"
	EndpointEnv     string // the variable that sets the endpoint
	DefaultEndpoint string
	On              func(host.Info) bool // whether the firmware says the host is one
	Event, Reason   string               // of the notices
	Parse           func(body []byte) (time.Time, error)
}

// Settings are a source's Config as this package takes it, with the
// defaults applied; invalid values are left for Available to report.
type Settings struct {
	Endpoint                             string // as configured: "" means EndpointEnv, else DefaultEndpoint
	Interval, RequestTimeout, MaxBackoff time.Duration
	Floor                                time.Duration // the least Interval
	HTTPClient                           *http.Client
	Logger                               *slog.Logger
	Root                                 string
	DNSDial                              httpguard.DialFunc
}

func (sp *Spec) prefix() string { return sp.Name + ": " }

// endpoint returns the base URL, without a trailing slash, and whether it
// was configured (in Config or the environment).
func (sp *Spec) endpoint(st Settings) (base string, configured bool, err error) {
	base, err = endpointOf(sp.prefix(), st.Endpoint, sp.EndpointEnv, sp.DefaultEndpoint, os.Getenv)
	return base, st.Endpoint != "" || os.Getenv(sp.EndpointEnv) != "", err
}

// Available returns, without touching the network, the error that Watch
// would return at once, or nil: an error that does not wrap
// termsig.ErrUnavailable if st cannot work (its endpoint, its durations),
// whatever the host; nil when an endpoint is configured or the firmware
// says the host is one of the cloud's; otherwise an error wrapping
// termsig.ErrUnavailable that says what the firmware says.
func (sp *Spec) Available(st Settings) error {
	_, configured, err := sp.endpoint(st)
	if err != nil {
		return err
	}
	if err := checkDurations(sp.prefix(),
		duration{"Interval", st.Interval, st.Floor},
		duration{"RequestTimeout", st.RequestTimeout, 0},
		duration{"MaxBackoff", st.MaxBackoff, 0},
	); err != nil {
		return err
	}
	if configured {
		return nil
	}
	if !sp.On(host.Detect(st.Root, nil)) {
		return fmt.Errorf("%snot %s (%s), and neither Config.Endpoint nor %s is set: %w",
			sp.prefix(), sp.Host, host.ReadBIOS(st.Root).Quote("sys_vendor", "product_name"), sp.EndpointEnv, termsig.ErrUnavailable)
	}
	return nil
}

// Watch polls until ctx is done, with the fetch that poll makes from the
// Watch's Client and the endpoint's base URL, then returns ctx.Err(). st
// must be Available, with its defaults applied.
func (sp *Spec) Watch(ctx context.Context, r *termsig.Run, st Settings, poll func(c *Client, base string) func(context.Context) (Answer, error)) error {
	base, _, err := sp.endpoint(st)
	if err != nil {
		return err
	}
	c := newClient(sp.prefix(), st.HTTPClient, st.DNSDial)
	defer c.Close()
	p := poller{
		Prefix:     sp.prefix(),
		Event:      sp.Event,
		Reason:     sp.Reason,
		Interval:   st.Interval,
		MaxBackoff: st.MaxBackoff,
		Fetch:      poll(c, base),
		Parse:      sp.Parse,
		Logger:     st.Logger,
	}
	p.run(ctx, r)
	return ctx.Err()
}

// maxBody bounds what is read of an answer: a termination time is 19 or
// 20 bytes, a token some dozens.
const maxBody = 64 << 10

// maxPast and maxAhead bound a termination time that is taken as one:
// the clouds post it minutes ahead, and an instance's clock may be off;
// a time further away is an error, never a notice.
const (
	maxPast  = time.Hour
	maxAhead = 24 * time.Hour
)

// maxRaw bounds Notice.Raw.
const maxRaw = 256

// An Answer is the outcome of one poll: Found is false for a 404, true
// for a 200 with its Body.
type Answer struct {
	Found bool
	Body  []byte
}

// A poller polls one path whose answer is a termination time, and turns
// what changes into notices. Its fields are set before run and not
// changed after.
type poller struct {
	Prefix   string // of errors and log lines, such as "alibaba: "
	Event    string // of its notices
	Reason   string // of its Terminate notices
	Interval time.Duration
	// MaxBackoff caps the wait after failed polls, which doubles from
	// Interval; each wait is drawn from the upper half of its step.
	MaxBackoff time.Duration
	// Fetch makes one poll: a 200 or a 404, or an error whose text does
	// not change from poll to poll.
	Fetch func(ctx context.Context) (Answer, error)
	// Parse reads the time of a 200; an error means that the body is no
	// termination time.
	Parse  func(body []byte) (time.Time, error)
	Logger *slog.Logger // each notice, at debug level
}

// run polls until ctx is done, start to start every Interval, and after
// a failure with backoff. It calls r.Ready once the first poll has been
// answered (and its notice sent) or has failed.
func (p *poller) run(ctx context.Context, r *termsig.Run) {
	parts := health.New(r, 1)
	bo := backoff.Backoff{Base: p.Interval, Max: max(p.MaxBackoff, p.Interval), Jitter: true}
	var st state
	var next time.Time
	for backoff.Until(ctx, next) {
		start := time.Now()
		a, err := p.Fetch(ctx)
		if ctx.Err() != nil {
			return // an error caused by Stop is no error
		}
		var nt *termsig.Notice
		if err == nil {
			nt, err = st.update(p, a, time.Now())
		}
		parts.Set(0, err)
		if nt != nil {
			p.Logger.Debug(p.Prefix+"notice", "notice", *nt)
			if r.Send(ctx, *nt) != nil {
				return
			}
		}
		parts.Looked(0)
		if err != nil {
			next = time.Now().Add(bo.Next())
			continue
		}
		bo.Reset()
		next = start.Add(p.Interval)
	}
}

// state is what a poller has reported.
type state struct {
	reported bool
	deadline time.Time // of the last Terminate sent, while reported
}

// update returns the notice that a, read at now, calls for, if any, or
// the error of a body that is no termination time, and records what it
// reports.
func (st *state) update(p *poller, a Answer, now time.Time) (*termsig.Notice, error) {
	if !a.Found {
		if !st.reported {
			return nil, nil
		}
		*st = state{}
		return &termsig.Notice{Kind: termsig.Cleared, Event: p.Event, Reason: "termination time withdrawn", Observed: now}, nil
	}
	at, err := p.Parse(a.Body)
	if err != nil {
		return nil, fmt.Errorf("%stermination time: %w", p.Prefix, err)
	}
	if at.Before(now.Add(-maxPast)) || at.After(now.Add(maxAhead)) {
		// A placeholder (the zero time, the epoch, 9999) is no release
		// time: the clouds announce minutes ahead.
		return nil, fmt.Errorf("%stermination time %s is not within %v before or %v after now", p.Prefix, at.UTC().Format(time.RFC3339), maxPast, maxAhead)
	}
	if st.reported && !at.Before(st.deadline) {
		return nil, nil // the same, or later: the program was told no later
	}
	st.reported, st.deadline = true, at
	raw := string(a.Body)
	if len(raw) > maxRaw {
		raw = raw[:maxRaw]
	}
	return &termsig.Notice{Kind: termsig.Terminate, Event: p.Event, Reason: p.Reason, Deadline: at, Observed: now, Raw: raw}, nil
}

// Describe says what a body that is not what it should be is, for an
// error message whose text does not change with the body's bytes (a
// timestamp, a request id in a portal's page): its length, and whether
// it looks like HTML.
func Describe(b []byte) string {
	kind := "bytes"
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '<' {
		kind = "bytes of markup"
	}
	return fmt.Sprintf("%d %s", len(b), kind)
}

// A Client sends a source's requests: the caller's *http.Client or one of
// the source's own, in a copy whose transport refuses redirects and cuts
// off answers past 64 KiB of body or 64 KiB of head (see package
// httpguard).
type Client struct {
	prefix string
	hc     *http.Client
	close  func()
}

// newClient returns the Client of one Watch: hc, or when it is nil a
// client of the source's own that dials directly with a 2 s connect
// timeout, its lookups dialled by dnsDial (see httpguard.NewTransport).
// prefix starts its errors. Close it when Watch returns.
func newClient(prefix string, hc *http.Client, dnsDial httpguard.DialFunc) *Client {
	var tr *http.Transport
	if hc == nil {
		tr = httpguard.NewTransport(2*time.Second, 1, dnsDial)
		hc = &http.Client{Transport: tr}
	}
	g, unguard := httpguard.Guard(hc, maxBody)
	return &Client{prefix: prefix, hc: g, close: func() {
		unguard()
		if tr != nil {
			tr.CloseIdleConnections()
		}
	}}
}

// Close closes the idle connections of what newClient made.
func (c *Client) Close() { c.close() }

// Do sends req, made with rctx (ctx with the timeout of one poll), and
// returns the status and body of the answer, or an error whose text does
// not change from request to request, starting with the prefix and what
// (such as "token: "). A redirect, a body or a head past 64
// KiB are errors.
func (c *Client) Do(ctx, rctx context.Context, req *http.Request, timeout time.Duration, what string) (int, []byte, error) {
	fail := func(err error) (int, []byte, error) {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		return 0, nil, fmt.Errorf("%s%s%w", c.prefix, what, httpguard.Stable(ctx, rctx, err, timeout))
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return fail(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body) // cut off past maxBody by the guard
	if err != nil {
		return fail(err)
	}
	return res.StatusCode, body, nil
}

// Get reads url once, within timeout, with header, and returns what its
// answer says: a 200 is Found with its body, a 404 not Found, any other
// status an error.
func (c *Client) Get(ctx context.Context, url string, header http.Header, timeout time.Duration) (Answer, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return Answer{}, err
	}
	maps.Copy(req.Header, header)
	status, body, err := c.Do(ctx, rctx, req, timeout, "")
	if err != nil {
		return Answer{}, err
	}
	return c.Answer(status, body)
}

// Answer returns what an answer with status and body says: a 200 is
// Found with its body, a 404 not Found, any other status an error.
func (c *Client) Answer(status int, body []byte) (Answer, error) {
	switch status {
	case http.StatusOK:
		return Answer{Found: true, Body: body}, nil
	case http.StatusNotFound:
		return Answer{}, nil
	}
	return Answer{}, c.StatusError("", status, body)
}

// StatusError is the error of an answer with an unexpected status. Its
// text is the status alone, not the body, which may name its request: a
// new text is a change that the Notifier logs.
func (c *Client) StatusError(what string, status int, body []byte) error {
	return fmt.Errorf("%s%sHTTP %d: %s", c.prefix, what, status, cmp.Or(http.StatusText(status), "unknown status"))
}

// endpointOf returns the base URL of the metadata service, without a
// trailing slash: configured (the Config's Endpoint), else from the
// environment variable env, else def. One that is not an absolute http or
// https URL with a host and nothing after it is an error that names where
// it came from.
func endpointOf(prefix, configured, env, def string, getenv func(string) string) (string, error) {
	base, from := configured, "Config.Endpoint"
	if base == "" {
		base, from = getenv(env), env
	}
	if base == "" {
		return def, nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" ||
		strings.ContainsAny(base, "?#") || u.User != nil {
		return "", fmt.Errorf("%s%s %q is not an absolute http or https URL with a host and no path, query or fragment", prefix, from, base)
	}
	return strings.TrimRight(base, "/"), nil
}

// A duration is a Config's duration, checked by checkDurations.
type duration struct {
	name  string // the field, such as "Interval"
	value time.Duration
	floor time.Duration // the least positive value allowed; 0: any
}

// checkDurations returns an error naming the first of ds that is
// negative, or positive and below its floor; nil if none is.
func checkDurations(prefix string, ds ...duration) error {
	for _, d := range ds {
		switch {
		case d.value < 0:
			return fmt.Errorf("%sConfig.%s is negative (%v)", prefix, d.name, d.value)
		case d.value > 0 && d.value < d.floor:
			return fmt.Errorf("%sConfig.%s %v is below FloorInterval (%v): it would hammer the metadata service", prefix, d.name, d.value, d.floor)
		}
	}
	return nil
}

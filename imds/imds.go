package imds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
	"github.com/termsig/termsig/internal/host"
)

// Name is the name of the source, in notices and in Notifier.Status.
const Name = "imds"

// The metadata paths the source polls, relative to /latest/meta-data/.
const (
	PathInstanceAction = "spot/instance-action"
	PathRebalance      = "events/recommendations/rebalance"
	PathScheduled      = "events/maintenance/scheduled"
	PathLifecycle      = "autoscaling/target-lifecycle-state"
)

// Defaults of [Config].
const (
	DefaultInterval         = time.Second
	DefaultAdvisoryInterval = 30 * time.Second
	DefaultTimeout          = 2 * time.Second
	DefaultMaxBackoff       = 10 * time.Second
)

// Events selects what a [Source] watches.
type Events uint8

// The events a Source can watch.
const (
	// SpotInterruption: spot/instance-action (urgent).
	SpotInterruption Events = 1 << iota
	// LifecycleState: autoscaling/target-lifecycle-state (urgent).
	LifecycleState
	// RebalanceRecommendation: events/recommendations/rebalance (advisory).
	RebalanceRecommendation
	// ScheduledMaintenance: events/maintenance/scheduled (advisory).
	ScheduledMaintenance

	// AllEvents is every event above.
	AllEvents = SpotInterruption | LifecycleState | RebalanceRecommendation | ScheduledMaintenance
)

// Config configures a [Source]. The zero Config watches every event at the
// default intervals on the SDK's default endpoint.
type Config struct {
	// Endpoint is the IMDS base URL, such as "http://127.0.0.1:1338".
	// Empty means the SDK's default: AWS_EC2_METADATA_SERVICE_ENDPOINT if
	// set, else http://169.254.169.254.
	Endpoint string

	// Client is the SDK client to use; it overrides Endpoint, and is used
	// as it is (its own retryer, timeouts and AWS_EC2_METADATA_DISABLED
	// handling). Nil means a client made for the source: waits between
	// the SDK's attempts scaled to Interval, no retry quota, connections
	// closed when Watch returns.
	Client *awsimds.Client

	// Interval is how often the urgent paths (spot/instance-action,
	// autoscaling/target-lifecycle-state) are polled, start to start.
	// Zero means DefaultInterval (1 s).
	Interval time.Duration

	// AdvisoryInterval is how often the advisory paths (rebalance
	// recommendation, scheduled maintenance) are polled. Zero means
	// DefaultAdvisoryInterval (30 s).
	AdvisoryInterval time.Duration

	// Timeout bounds one poll of one path, the SDK's own retries included.
	// Zero means DefaultTimeout (2 s).
	Timeout time.Duration

	// MaxBackoff caps the wait between polls of a path that keeps failing:
	// after n failures in a row the wait is the path's interval times
	// 2^(n-1), up to MaxBackoff (or the interval, if that is longer). The
	// urgent paths are capped further, at 4×Interval, so that throttling
	// delays a spot interruption by seconds, not a tenth of its notice.
	// Zero means DefaultMaxBackoff (10 s).
	MaxBackoff time.Duration

	// Events selects what to watch. Zero means AllEvents.
	Events Events

	// Logger receives one line per change of state: a notice, an error
	// that starts or changes, recovery. Nil means no logging.
	Logger *slog.Logger

	// Root is where host facts (DMI under sys/class/dmi/id) are read;
	// empty means "/". Tests point it at a directory of their own.
	Root string
}

// A Source watches the EC2 instance metadata service for spot
// interruptions, rebalance recommendations, scheduled maintenance and Auto
// Scaling lifecycle changes. Create it with [New]. A Source may be watched
// by several Notifiers at once; each Watch polls on its own.
type Source struct {
	cfg Config
}

// New returns a Source configured by cfg.
func New(cfg Config) *Source {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.AdvisoryInterval <= 0 {
		cfg.AdvisoryInterval = DefaultAdvisoryInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.Events == 0 {
		cfg.Events = AllEvents
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	return &Source{cfg: cfg}
}

// Name returns "imds".
func (s *Source) Name() string { return Name }

// Available reports, from local facts only and without touching the
// network, whether the source can work on this host: it returns nil when a
// Client or Endpoint is configured, when AWS_EC2_METADATA_SERVICE_ENDPOINT
// is set, or when DMI says the host is an EC2 instance; otherwise an error
// wrapping termsig.ErrUnavailable. AWS_EC2_METADATA_DISABLED=true makes it
// unavailable unless a Client or Endpoint is configured.
func (s *Source) Available() error {
	if s.cfg.Client != nil || s.cfg.Endpoint != "" {
		return nil
	}
	in := host.Detect(s.cfg.Root, nil)
	switch {
	case in.IMDSDisabled:
		return fmt.Errorf("imds: disabled by AWS_EC2_METADATA_DISABLED: %w", termsig.ErrUnavailable)
	case in.IMDSEndpoint != "":
		return nil
	case !in.EC2:
		return fmt.Errorf("imds: not an EC2 instance (DMI) and no endpoint configured: %w", termsig.ErrUnavailable)
	}
	return nil
}

// Watch polls IMDS until ctx is done and sends a notice for each new event:
//
//   - spot/instance-action: Terminate, Stop or Hibernate by its action,
//     with Deadline its time. One interruption is reported once, even when
//     its time moves between polls; again only if the action changes or the
//     path went back to 404 in between.
//   - autoscaling/target-lifecycle-state Terminated: Terminate, deadline
//     unknown. Other states send nothing.
//   - events/recommendations/rebalance: Rebalance once; Cleared if it goes
//     back to 404.
//   - events/maintenance/scheduled: Maintenance for each active EventId
//     (again if its NotBefore changes), with Deadline its NotBefore;
//     Cleared naming the EventId when it turns canceled or completed, or
//     disappears.
//
// A 404 means nothing pending (for scheduled events, which IMDS lists as
// [] when there are none, a 404 changes nothing). Errors (IMDS unreachable, 401, 429, 5xx,
// timeouts, bodies that cannot be what IMDS sends) never make a notice:
// the path is polled again with backoff (see Config.MaxBackoff), the error
// shows in Notifier.Status through termsig.ReportError, and it is logged
// once per change. Watch returns an error wrapping termsig.ErrUnavailable at
// once, without a network probe, when [Source.Available] says so.
func (s *Source) Watch(ctx context.Context, out chan<- termsig.Notice) error {
	if err := s.Available(); err != nil {
		return err
	}
	client := s.cfg.Client
	if client == nil {
		tr := newTransport()
		defer tr.CloseIdleConnections()
		opts := awsimds.Options{
			Endpoint:                 s.cfg.Endpoint,
			HTTPClient:               &http.Client{Transport: tr},
			Retryer:                  newRetryer(s.cfg.Interval),
			DisableDefaultMaxBackoff: true,
		}
		if s.cfg.Endpoint != "" {
			// An endpoint given in Config is a request to use it, as
			// Available says: AWS_EC2_METADATA_DISABLED, which would
			// otherwise make the SDK refuse every request, does not apply.
			opts.ClientEnableState = awsimds.ClientEnabled
		}
		client = awsimds.New(opts)
	}
	w := &watcher{cfg: &s.cfg, client: client, out: out, health: newHealth(ctx, s.cfg.Logger)}
	ps := w.pollers()
	for _, p := range ps {
		w.health.paths = append(w.health.paths, p.path)
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { w.loop(ctx, p) })
	}
	wg.Wait()
	return ctx.Err()
}

// newTransport returns the transport of a Source's own client: no proxy
// (IMDS is link-local), a short dial timeout as the SDK uses, and
// keep-alive so that polling once a second reuses one connection.
func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 250 * time.Millisecond, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
}

// newRetryer returns the SDK retryer of a Source's own client: the SDK's
// standard three attempts (so that a 401 is retried with a fresh token and
// a single 503 does not fail a poll), but with waits between attempts
// scaled to the polling interval rather than up to a second, and without
// the retry quota, which a long outage would drain for good: the source's
// own backoff between polls is what protects IMDS.
func newRetryer(interval time.Duration) aws.Retryer {
	std := retry.NewStandard(func(o *retry.StandardOptions) {
		o.RateLimiter = ratelimit.None
	})
	return retry.AddWithMaxBackoffDelay(std, min(interval/4, time.Second))
}

// A poller is one path with what has been reported from it. Each runs in
// its own goroutine, so its state needs no lock.
type poller struct {
	path     string
	interval time.Duration
	limit    time.Duration // the longest backoff
	// handle turns one answer into notices. found is false for 404.
	handle func(found bool, body []byte) ([]termsig.Notice, error)
}

type watcher struct {
	cfg    *Config
	client *awsimds.Client
	out    chan<- termsig.Notice
	health *health
}

func (w *watcher) pollers() []poller {
	var ps []poller
	urgent := min(w.cfg.MaxBackoff, 4*w.cfg.Interval)
	if w.cfg.Events&SpotInterruption != 0 {
		ps = append(ps, poller{PathInstanceAction, w.cfg.Interval, urgent, newSpotHandler()})
	}
	if w.cfg.Events&LifecycleState != 0 {
		ps = append(ps, poller{PathLifecycle, w.cfg.Interval, urgent, newLifecycleHandler()})
	}
	if w.cfg.Events&RebalanceRecommendation != 0 {
		ps = append(ps, poller{PathRebalance, w.cfg.AdvisoryInterval, w.cfg.MaxBackoff, newRebalanceHandler()})
	}
	if w.cfg.Events&ScheduledMaintenance != 0 {
		ps = append(ps, poller{PathScheduled, w.cfg.AdvisoryInterval, w.cfg.MaxBackoff, newScheduledHandler()})
	}
	return ps
}

// loop polls one path until ctx is done.
func (w *watcher) loop(ctx context.Context, p poller) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	// After n failures in a row: interval·2^(n-1), up to the limit.
	bo := backoff.Backoff{Base: p.interval, Max: p.limit}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		notices, err := w.poll(ctx, p)
		if ctx.Err() != nil {
			return // an error caused by Stop is no error
		}
		w.health.set(p.path, err)
		for _, n := range notices {
			w.cfg.Logger.Info("imds: notice", "path", p.path, "notice", n.String())
			select {
			case w.out <- n:
			case <-ctx.Done():
				return
			}
		}
		wait := p.interval
		if err != nil {
			wait = bo.Next()
		} else {
			bo.Reset()
		}
		timer.Reset(time.Until(start.Add(wait)))
	}
}

// poll fetches p's path once and hands the answer to p.handle.
func (w *watcher) poll(ctx context.Context, p poller) ([]termsig.Notice, error) {
	found, body, err := w.get(ctx, p.path)
	if err != nil {
		return nil, err
	}
	notices, err := p.handle(found, body)
	if err != nil {
		return nil, &pathError{path: p.path, msg: p.path + ": " + err.Error(), err: err}
	}
	now := time.Now()
	for i := range notices {
		notices[i].Source = Name
		notices[i].Observed = now
	}
	return notices, nil
}

// maxBody bounds what is read of one answer: real ones are a few hundred
// bytes.
const maxBody = 1 << 20

func (w *watcher) get(ctx context.Context, path string) (found bool, body []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	res, err := w.client.GetMetadata(ctx, &awsimds.GetMetadataInput{Path: path})
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
			return false, nil, nil
		}
		return false, nil, &pathError{path: path, msg: describe(err, w.cfg.Timeout), err: err}
	}
	defer res.Content.Close()
	body, err = io.ReadAll(io.LimitReader(res.Content, maxBody+1))
	if err != nil {
		return false, nil, &pathError{path: path, msg: "reading the answer: " + describe(err, w.cfg.Timeout), err: err}
	}
	if len(body) > maxBody {
		return false, nil, &pathError{path: path, msg: path + ": answer larger than 1 MiB", err: errBadPayload}
	}
	return true, body, nil
}

// describe says what went wrong in a few stable words, so that a log line
// is written once per kind of failure rather than once per poll (the SDK's
// messages carry request details that change every time).
func describe(err error, timeout time.Duration) string {
	var re *smithyhttp.ResponseError
	var ne net.Error
	switch {
	case errors.As(err, &re):
		return fmt.Sprintf("HTTP %d", re.HTTPStatusCode())
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no answer within %v", timeout)
	case errors.As(err, &ne):
		return "unreachable: " + ne.Error()
	}
	return err.Error()
}

// pathError is a failed poll of one path. Error is short and stable, and
// names the path only when the failure is the path's own (a bad payload),
// so that IMDS being down reads the same whichever path saw it first;
// Unwrap gives the cause.
type pathError struct {
	path, msg string
	err       error
}

func (e *pathError) Error() string { return "imds: " + e.msg }
func (e *pathError) Unwrap() error { return e.err }

// health gathers the last error of each path into the one error that the
// source reports, and logs when that changes.
type health struct {
	ctx context.Context
	log *slog.Logger

	paths []string // in polling order; set before the pollers start

	mu   sync.Mutex
	errs map[string]error
	last string
}

func newHealth(ctx context.Context, log *slog.Logger) *health {
	return &health{ctx: ctx, log: log, errs: map[string]error{}}
}

// set records the outcome of a poll of path and reports the source's
// health: the error of the first failing path, in polling order, or nil.
func (h *health) set(path string, err error) {
	h.mu.Lock()
	h.errs[path] = err
	var failing []string
	var first error
	for _, p := range h.paths {
		if e := h.errs[p]; e != nil {
			failing = append(failing, p)
			if first == nil {
				first = e
			}
		}
	}
	text := ""
	if first != nil {
		text = first.Error()
	}
	changed := text != h.last
	h.last = text
	// Under the lock, so that two pollers' reports reach the Notifier in
	// the order they were made.
	termsig.ReportError(h.ctx, first)
	h.mu.Unlock()

	switch {
	case !changed:
	case first != nil:
		h.log.Warn("imds: polling fails, retrying with backoff", "err", first, "failing", strings.Join(failing, ","))
	default:
		h.log.Info("imds: polling works again")
	}
}

func newSpotHandler() func(bool, []byte) ([]termsig.Notice, error) {
	reported := "" // the action reported and still pending
	return func(found bool, body []byte) ([]termsig.Notice, error) {
		if !found {
			reported = ""
			return nil, nil
		}
		a, err := parseInstanceAction(body)
		if err != nil {
			return nil, err
		}
		if a.Action == reported {
			return nil, nil // the same interruption, maybe with a recomputed time
		}
		reported = a.Action
		return []termsig.Notice{{
			Kind:     a.Kind,
			Reason:   "spot interruption: " + a.Action,
			Deadline: a.Deadline,
			Raw:      string(body),
		}}, nil
	}
}

func newLifecycleHandler() func(bool, []byte) ([]termsig.Notice, error) {
	last := ""
	return func(found bool, body []byte) ([]termsig.Notice, error) {
		if !found {
			last = ""
			return nil, nil
		}
		state, err := parseLifecycle(body)
		if err != nil {
			return nil, err
		}
		prev := last
		last = state
		if state != "Terminated" || prev == "Terminated" {
			return nil, nil
		}
		return []termsig.Notice{{
			Kind:   termsig.Terminate,
			Reason: "auto scaling: target lifecycle state Terminated",
			Raw:    string(body),
		}}, nil
	}
}

func newRebalanceHandler() func(bool, []byte) ([]termsig.Notice, error) {
	seen := false
	return func(found bool, body []byte) ([]termsig.Notice, error) {
		if !found {
			if !seen {
				return nil, nil
			}
			seen = false
			return []termsig.Notice{{Kind: termsig.Cleared, Reason: "rebalance recommendation withdrawn"}}, nil
		}
		at, err := parseRebalance(body)
		if err != nil {
			return nil, err
		}
		if seen {
			return nil, nil
		}
		seen = true
		return []termsig.Notice{{
			Kind:   termsig.Rebalance,
			Reason: "rebalance recommendation, noticeTime " + at,
			Raw:    string(body),
		}}, nil
	}
}

func newScheduledHandler() func(bool, []byte) ([]termsig.Notice, error) {
	reported := map[string]string{} // EventId → NotBefore reported
	return func(found bool, body []byte) ([]termsig.Notice, error) {
		if !found {
			// IMDS answers [] when nothing is scheduled; a 404 here says
			// nothing about the events, so it changes nothing.
			return nil, nil
		}
		evs, err := parseScheduled(body)
		if err != nil {
			return nil, err
		}
		var notices []termsig.Notice
		// One entry per EventId; if an answer lists an id twice, an
		// active entry wins, so that the id does not flap.
		now := map[string]scheduledEvent{}
		var order []string
		for _, e := range evs {
			prev, seen := now[e.EventID]
			if !seen {
				order = append(order, e.EventID)
			}
			if !seen || !prev.active() {
				now[e.EventID] = e
			}
		}
		// Ended events first, in EventId order, so that a replaced event
		// reads as "cleared, then new".
		var ended []string
		for id := range reported {
			if e, ok := now[id]; !ok || !e.active() {
				ended = append(ended, id)
			}
		}
		sort.Strings(ended)
		for _, id := range ended {
			delete(reported, id)
			why := "gone"
			if e, ok := now[id]; ok {
				why = strings.ToLower(e.State)
			}
			notices = append(notices, termsig.Notice{
				Kind:   termsig.Cleared,
				Reason: "scheduled event " + id + " " + why,
				Raw:    string(body),
			})
		}
		for _, id := range order {
			e := now[id]
			if nb, ok := reported[e.EventID]; !e.active() || ok && nb == e.NotBefore {
				continue
			}
			reported[e.EventID] = e.NotBefore
			reason := e.Code + ": " + e.Description + " (" + e.EventID
			if e.NotAfter != "" {
				reason += ", until " + e.NotAfter
			}
			reason += ")"
			notices = append(notices, termsig.Notice{
				Kind:     termsig.Maintenance,
				Reason:   reason,
				Deadline: parseEventTime(e.NotBefore),
				Raw:      string(body),
			})
		}
		return notices, nil
	}
}

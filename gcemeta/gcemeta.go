package gcemeta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/host"
)

// Protocol constants.
const (
	// HostEnv is the environment variable that names the metadata
	// server's host[:port], as in Google's own clients. When it is set,
	// the host counts as being on GCE.
	HostEnv = "GCE_METADATA_HOST"

	// DefaultHost is the metadata server's name on GCE.
	DefaultHost = "metadata.google.internal"

	// The defaults of the Config fields of the same names.
	DefaultWaitTimeout    = 60 * time.Second
	DefaultRequestTimeout = 5 * time.Second
	DefaultMinInterval    = time.Second
	DefaultBackoff        = 250 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second

	// The time left after the notice, as documented by Google: about 30 s
	// between a preemption's soft-off and the hard power-off, and 60 s
	// between a maintenance-event value and the event.
	PreemptionNotice  = 30 * time.Second
	MaintenanceNotice = 60 * time.Second
)

// Name is the name of the source, in notices and in Notifier.Status.
const Name = "gcemeta"

// Config configures a [Source]. The zero Config is ready to use: it watches
// the metadata server of the GCE VM it runs on, and is unavailable
// elsewhere.
type Config struct {
	// Host is the metadata server's host[:port], such as "127.0.0.1:8080"
	// for a fake. Empty means the value of GCE_METADATA_HOST (see
	// [HostEnv]) and, when that is empty too, [DefaultHost] on a host
	// that DMI says is GCE. Off GCE, with neither set, Watch returns
	// [termsig.ErrUnavailable] at once without touching the network. A
	// Host that is set means "on GCE": DMI is not read.
	Host string

	// Root is where the host's files are read from (DMI under
	// sys/class/dmi/id); empty means "/". Tests point it at a directory of
	// their own.
	Root string

	// Getenv reads environment variables; nil means os.Getenv.
	Getenv func(string) string

	// HTTPClient sends the requests. Nil means a client of the Source's
	// own for each Watch, which dials directly (never through a proxy:
	// the metadata server is link-local) with a 2 s connect timeout, as
	// Google's metadata package does, and whose idle connections are
	// closed when Watch returns. Timeouts come from request contexts, so
	// a client's Timeout must be zero or above WaitTimeout +
	// RequestTimeout.
	HTTPClient *http.Client

	// WaitTimeout is the longest a long poll waits for a change, sent as
	// timeout_sec: at idle, each key costs one request per WaitTimeout.
	// It is rounded up to whole seconds; zero means
	// [DefaultWaitTimeout] (60 s).
	WaitTimeout time.Duration

	// RequestTimeout is how long a plain read may take, and how long a
	// long poll may take beyond WaitTimeout, before the request is
	// abandoned as lost (a silently dead connection, a hung server).
	// Zero means [DefaultRequestTimeout] (5 s).
	RequestTimeout time.Duration

	// MinInterval is the least time between the starts of a long poll
	// that was answered and the next request for the same key, so that a
	// server that ignores wait_for_change costs at most one request per
	// MinInterval per key. (The first long poll follows the first read at
	// once; after a failure, the backoff applies instead.) Zero means
	// [DefaultMinInterval] (1 s).
	MinInterval time.Duration

	// Backoff is the wait after a failed request (an error status, a
	// network error, a timeout, a value not understood); it doubles with
	// each failure in a row, up to MaxBackoff, and each wait is drawn at
	// random from its upper half. Zero means [DefaultBackoff] (250 ms).
	Backoff time.Duration

	// MaxBackoff caps Backoff. It is short by default because a
	// preemption leaves 30 s. Zero means [DefaultMaxBackoff] (5 s).
	MaxBackoff time.Duration

	// Logger receives one line per change of state: watching started, a
	// key not served, a key failing or working again, a value changed.
	// Nil means no logging.
	Logger *slog.Logger
}

// A Source reports GCE preemption and host maintenance: a [termsig.Source]
// named "gcemeta". It long-polls instance/preempted,
// instance/maintenance-event and, where the server has it,
// instance/upcoming-maintenance. See the package documentation for the
// notices it sends.
//
// A Source holds no state between Watch calls; Watch may be called by
// several goroutines at once, each call watching on its own.
type Source struct {
	cfg Config
}

// New returns a Source configured by cfg.
func New(cfg Config) *Source { return &Source{cfg: cfg} }

// Name returns "gcemeta".
func (s *Source) Name() string { return Name }

// Available reports, from local facts only and without touching the
// network, whether the source can work on this host: it returns nil when
// [Config.Host] or GCE_METADATA_HOST is set or DMI says the host is a GCE
// VM; otherwise an error wrapping [termsig.ErrUnavailable]. It returns
// another error if the host is not a valid host[:port]. Watch returns the
// same error at once.
func (s *Source) Available() error {
	_, err := s.host()
	return err
}

// An Error is a failed request for one key, or a value that could not be
// understood. Watch retries after it; [termsig.ReportError] shows it in
// [termsig.Notifier.Status] meanwhile.
//
// Err is a [*metadata.Error] for an unexpected HTTP status, a
// [metadata.NotDefinedError] for 404 on a key that was served before, an
// error wrapping [context.DeadlineExceeded] when the server did not answer
// in time, or a network or parse error.
//
// [*metadata.Error]: https://pkg.go.dev/cloud.google.com/go/compute/metadata#Error
// [metadata.NotDefinedError]: https://pkg.go.dev/cloud.google.com/go/compute/metadata#NotDefinedError
type Error struct {
	Key string // such as "instance/preempted"
	Err error
}

func (e *Error) Error() string { return "gcemeta: " + e.Key + ": " + e.Err.Error() }

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// Watch sends the notices that the metadata server's values call for,
// until ctx is done; then it returns ctx.Err(). It honours the
// [termsig.Source] contract:
//
//   - Off GCE (see [Config.Host]) it returns an error wrapping
//     [termsig.ErrUnavailable] at once, without network access.
//   - It returns another error at once if the host is not a valid
//     host[:port].
//   - It reads the current values first, so that a VM that is already
//     preempted is reported, then long-polls each key.
//   - Failed requests and bad values are retried with backoff and
//     reported with [termsig.ReportError]; they never cause a notice.
//   - Each change is reported once.
//   - When ctx is done, it cancels its requests and returns at once,
//     whatever the server does, leaving no goroutine behind.
func (s *Source) Watch(ctx context.Context, out chan<- termsig.Notice) error {
	w, err := s.start()
	if err != nil {
		return err
	}
	if w.ownTransport != nil {
		defer w.ownTransport.CloseIdleConnections()
	}
	w.log.Debug("gcemeta: watching", "host", w.host, "wait_timeout", time.Duration(w.timeoutSec)*time.Second)

	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { w.watchKey(ctx, i, out) })
	}
	wg.Wait() // only the optional key ends before ctx
	return ctx.Err()
}

// host returns the metadata server's host[:port], from local facts only.
func (s *Source) host() (string, error) {
	c := s.cfg
	h := c.Host
	if h == "" {
		root := c.Root
		if root == "" {
			root = "/"
		}
		in := host.Detect(root, c.Getenv)
		switch {
		case in.GCEHost != "":
			h = in.GCEHost
		case in.GCE:
			h = DefaultHost
		default:
			return "", fmt.Errorf("gcemeta: not on GCE (DMI product name is not Google's, and %s is not set): %w", HostEnv, termsig.ErrUnavailable)
		}
	}
	if u, err := url.Parse("http://" + h + "/"); err != nil || u.Host != h || u.User != nil {
		return "", fmt.Errorf("gcemeta: metadata host %q is not a host[:port]", h)
	}
	return h, nil
}

// start works out the configuration of one Watch.
func (s *Source) start() (*watcher, error) {
	h, err := s.host()
	if err != nil {
		return nil, err
	}
	c := s.cfg
	w := &watcher{
		host:           h,
		base:           "http://" + h + "/computeMetadata/v1/",
		hc:             c.HTTPClient,
		timeoutSec:     int((orDefault(c.WaitTimeout, DefaultWaitTimeout) + time.Second - 1) / time.Second),
		requestTimeout: orDefault(c.RequestTimeout, DefaultRequestTimeout),
		minInterval:    orDefault(c.MinInterval, DefaultMinInterval),
		backoff:        orDefault(c.Backoff, DefaultBackoff),
		maxBackoff:     orDefault(c.MaxBackoff, DefaultMaxBackoff),
		log:            c.Logger,
	}
	w.maxBackoff = max(w.maxBackoff, w.backoff)
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.hc == nil {
		w.ownTransport = &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: len(keys),
			IdleConnTimeout:     90 * time.Second,
		}
		w.hc = &http.Client{Transport: w.ownTransport}
	}
	return w, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// A watcher is one Watch call.
type watcher struct {
	host         string
	base         string // "http://host/computeMetadata/v1/"
	hc           *http.Client
	ownTransport *http.Transport // nil when the client is the caller's

	timeoutSec     int
	requestTimeout time.Duration
	minInterval    time.Duration
	backoff        time.Duration
	maxBackoff     time.Duration
	log            *slog.Logger

	mu      sync.Mutex
	failing [len(keys)]error
}

// setHealth records key i's state and tells the Notifier the first error
// of any key, or nil when every key works. It holds mu while it reports,
// so that the last report is the current state.
func (w *watcher) setHealth(ctx context.Context, i int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failing[i] = err
	var first error
	for _, e := range w.failing {
		if e != nil {
			first = e
			break
		}
	}
	// Every answer is reported, not only changes: Status's Reported then
	// says when the server last answered. The Notifier logs changes only.
	termsig.ReportError(ctx, first)
}

// errNoAnswer says that the server did not answer in time.
func errNoAnswer(d time.Duration) error {
	return fmt.Errorf("no answer within %v: %w", d, context.DeadlineExceeded)
}

var _ termsig.Source = (*Source)(nil)

// isNotFound is errors.As for metadata.NotDefinedError.
func isNotFound(err error) bool {
	var nd notDefined
	return errors.As(err, &nd)
}

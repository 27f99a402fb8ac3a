package gcemeta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/health"
	"github.com/termsig/termsig/internal/host"
	"github.com/termsig/termsig/internal/httpguard"
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
	DefaultMaxBackoff     = 5 * time.Second

	// FloorInterval is the least [Config.MinInterval] that a Config may
	// set: shorter waits between requests would hammer the metadata
	// server, which every process on the VM shares, when it ignores
	// wait_for_change. Watch rejects a Config below it.
	FloorInterval = 10 * time.Millisecond

	// The time left after the notice, as documented by Google: about 30 s
	// between a preemption's soft-off and the hard power-off, and 60 s
	// between a maintenance-event value and the event.
	PreemptionNotice  = 30 * time.Second
	MaintenanceNotice = 60 * time.Second
)

// defaultBackoff is the first wait after a failed request; it doubles
// with each failure in a row, up to Config.MaxBackoff.
const defaultBackoff = 250 * time.Millisecond

// The values of [termsig.Notice.Event]: one per key, so that a Cleared
// notice carries the Event of the advice it clears.
const (
	EventPreempted           = "preempted"
	EventMaintenance         = "maintenance-event"
	EventUpcomingMaintenance = "upcoming-maintenance"
)

// Name is the name of the source, in notices and in Notifier.Status.
const Name = "gcemeta"

// Config configures a [Source]. The zero Config is ready to use: it watches
// the metadata server of the GCE VM it runs on, and is unavailable
// elsewhere.
//
// Zero durations mean the defaults. Watch (and Available) reject a Config
// whose durations are negative, whose MinInterval is below
// [FloorInterval], or whose host (Host, or GCE_METADATA_HOST) is not a
// host[:port], with an error that starts "gcemeta: " and names the field:
// a [termsig.Notifier] then shows the source as failed. Such a Config is
// rejected on every host, GCE or not, so that the mistake shows where the
// program is written and tested rather than first in production.
type Config struct {
	// Host is the metadata server's host[:port], such as "127.0.0.1:8080"
	// for a fake: a host, not a base URL as other sources' Endpoint,
	// because GCE_METADATA_HOST and Google's compute/metadata package
	// name the server so. Empty means the value of GCE_METADATA_HOST (see
	// [HostEnv]) and, when that is empty too, [DefaultHost] on a host
	// whose firmware says it is GCE (see the package documentation for
	// the systems where that is known). Off GCE, with neither set, Watch
	// returns [termsig.ErrUnavailable] at once without touching the
	// network. A Host that is set means "on GCE": the firmware is not
	// read.
	Host string

	// Root is the directory below which the host's files are read (the
	// firmware's DMI under sys/class/dmi/id, on Linux); empty means "/".
	// Set it when the program runs in a container that sees the host's
	// root filesystem under another directory, such as /host, and does not
	// see the host's /sys itself. Tests point it at a directory of their
	// own, laid out like "/".
	Root string

	// HTTPClient sends the requests. Nil means a client of the Source's
	// own for each Watch, which dials directly (never through a proxy:
	// the metadata server is link-local) with a 2 s connect timeout, as
	// Google's metadata package does, resolves names with Go's resolver,
	// each lookup ending with its request, and whose idle connections are
	// closed when Watch returns. Timeouts come from request contexts, so
	// a client's Timeout must be zero or above WaitTimeout +
	// RequestTimeout.
	//
	// Either client is used through a copy whose transport refuses
	// redirects (a 3xx answer is an error, never followed) and cuts off
	// an answer whose head or body is longer than 64 KiB; HTTPClient
	// itself is not changed. Heads are cut off when HTTPClient.Transport
	// is an *http.Transport or nil: the copy uses a clone of it, whose
	// connections are closed when Watch returns. Another RoundTripper
	// bounds heads only if it does so itself (net/http's default is 10
	// MiB, which can cost a hundred times that in memory).
	HTTPClient *http.Client

	// WaitTimeout is the longest a long poll waits for a change, sent as
	// timeout_sec: at idle, each key costs one request per WaitTimeout.
	// (The server holds the request that long; RequestTimeout is what
	// the source allows on top.) It is rounded up to whole seconds; zero
	// means [DefaultWaitTimeout] (60 s). It must not be negative.
	WaitTimeout time.Duration

	// RequestTimeout is how long a plain read may take, and how long a
	// long poll may take beyond WaitTimeout, before the request is
	// abandoned as lost (a silently dead connection, a hung server). The
	// first reads are bounded by it too, so it is also the longest the
	// source takes to have its first look when the server does not
	// answer. Zero means [DefaultRequestTimeout] (5 s). It must not be
	// negative.
	RequestTimeout time.Duration

	// MinInterval is the least time between the starts of a long poll
	// whose answer changed nothing and the next request for the same key,
	// so that a server that ignores wait_for_change costs at most one
	// request per MinInterval per key. It is a floor, not a period as
	// other sources' Interval: a long poll that works asks again only
	// when the value changes or WaitTimeout passes. (The first long poll
	// follows the first read at once, and a long poll follows a change at
	// once, at most one per MinInterval/10; after a failure, the backoff
	// applies instead.) Zero means [DefaultMinInterval] (1 s); otherwise
	// it must be at least [FloorInterval].
	MinInterval time.Duration

	// MaxBackoff caps the wait after a failed request (an error status,
	// a network error, a timeout, a value not understood): the wait
	// starts at 250 ms and doubles with each failure in a row, each wait
	// drawn at random from its upper half. It is short by default because
	// a preemption leaves 30 s. Zero means [DefaultMaxBackoff] (5 s); it
	// must not be negative, and a MaxBackoff below 250 ms is taken as
	// 250 ms.
	MaxBackoff time.Duration

	// Logger receives one line per change of state that is not health:
	// watching started and a key not served (debug), a value changed
	// (info), a server that sends no ETag (warning). Failures are not
	// logged here: they are reported with [termsig.Run.Report], and the
	// Notifier logs each change. Nil means slog.Default(); pass
	// slog.New(slog.DiscardHandler) to silence it.
	Logger *slog.Logger

	// dnsDial dials the DNS server for the lookups of the source's own
	// client; nil means a net.Dialer. Tests point it at a server of their
	// own (see export_test.go).
	dnsDial httpguard.DialFunc

	// backoff is the first wait after a failure; zero means
	// defaultBackoff. Tests shorten it (see export_test.go), to see many
	// retries quickly: no user has a reason to.
	backoff time.Duration
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
	cfg Config // as given to New: zero still means the default
}

// New returns a Source configured by cfg. It checks nothing and opens
// nothing: Watch does.
func New(cfg Config) *Source { return &Source{cfg: cfg} }

// Name returns "gcemeta".
func (s *Source) Name() string { return Name }

// Available reports, from local facts only and without touching the
// network, whether the source can work on this host. It returns:
//
//   - the error that Watch would return at once if the Config is invalid
//     (see [Config]), on any host: a source that cannot work because of
//     its Config should fail where it shows, not be left out quietly, so
//     a caller that picks sources with Available should keep this one and
//     let Watch fail;
//   - an error wrapping [termsig.ErrUnavailable] off GCE: neither
//     [Config.Host] nor GCE_METADATA_HOST is set, and the firmware does
//     not say GCE;
//   - nil otherwise.
func (s *Source) Available() error {
	_, err := s.host()
	return err
}

// An Error is a failed request for one key, or a value that could not be
// understood. Watch retries after it; [termsig.Run.Report] shows it in
// [termsig.Notifier.Status] meanwhile.
//
// Its text is stable: it names the key and the failure, such as
// "gcemeta: instance/preempted: unreachable: connection refused", and
// carries no detail that differs from request to request (no URL with its
// ETag, no local port), and while several keys fail the one reported is
// the key that has failed longest, so that one outage is one change of the
// source's health however many requests fail.
//
// Err is a [*metadata.Error] for an unexpected HTTP status, a
// [metadata.NotDefinedError] for 404 on a key that was served before, an
// error wrapping [context.DeadlineExceeded] when the server did not answer
// in time, an error that wraps the network error (such as a
// [*net.OpError]), a parse error, or an error for an answer that is not
// the metadata server's (without "Metadata-Flavor: Google", a redirect,
// a head or body longer than 64 KiB).
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
//   - It returns an error at once if the Config is invalid (see
//     [Config]), on any host.
//   - Off GCE (see [Config.Host]) it returns an error wrapping
//     [termsig.ErrUnavailable] at once, without network access.
//   - Its first look is a plain read of each key's current value, so that
//     a VM that is already preempted is reported at once. Once every key
//     has had that read answered or failed (a timeout after
//     [Config.RequestTimeout], or the 404 of a key that the server does
//     not have), and any notice it called for has been sent, Watch calls
//     [termsig.Run.Ready]. Then it long-polls each key. This needs the
//     network, so the Source has no Traits method and termsig.New does
//     not wait for it.
//   - Failed requests and bad values are retried with backoff and
//     reported with [termsig.Run.Report], with a stable text (see
//     [Error]); they never cause a notice. Every answer counts as hearing
//     from the server ([termsig.Run.Heard]), so that
//     [termsig.SourceStatus.LastHeard] says when the server last answered,
//     even while another key fails.
//   - Each change is reported once.
//   - When ctx is done, it cancels its requests and returns at once,
//     whatever the server does, leaving no goroutine behind.
func (s *Source) Watch(ctx context.Context, r *termsig.Run) error {
	w, err := s.start(r)
	if err != nil {
		return err
	}
	defer w.unguard()
	if w.ownTransport != nil {
		defer w.ownTransport.CloseIdleConnections()
	}
	w.log.Debug("gcemeta: watching", "host", w.host, "wait_timeout", time.Duration(w.timeoutSec)*time.Second)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { w.watchKey(ctx, i) })
	}
	wg.Wait() // only the optional key ends before ctx
	return ctx.Err()
}

// check returns an error if a duration of c is out of range.
func (c Config) check() error {
	type field struct {
		name string
		d    time.Duration
	}
	for _, f := range []field{
		{"WaitTimeout", c.WaitTimeout}, {"RequestTimeout", c.RequestTimeout},
		{"MinInterval", c.MinInterval}, {"MaxBackoff", c.MaxBackoff},
	} {
		if f.d < 0 {
			return fmt.Errorf("gcemeta: Config.%s is negative (%v); zero means the default", f.name, f.d)
		}
	}
	if c.MinInterval > 0 && c.MinInterval < FloorInterval {
		return fmt.Errorf("gcemeta: Config.MinInterval is %v, below FloorInterval (%v): the metadata server would be hammered", c.MinInterval, FloorInterval)
	}
	return nil
}

// withDefaults returns c with each zero field set to its default. It is
// the one place where the defaults are applied; check looks at the Config
// as given.
func (c Config) withDefaults() Config {
	or := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	or(&c.WaitTimeout, DefaultWaitTimeout)
	or(&c.RequestTimeout, DefaultRequestTimeout)
	or(&c.MinInterval, DefaultMinInterval)
	or(&c.backoff, defaultBackoff)
	or(&c.MaxBackoff, DefaultMaxBackoff)
	c.MaxBackoff = max(c.MaxBackoff, c.backoff)
	if c.Root == "" {
		c.Root = "/"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// host checks the Config and returns the metadata server's host[:port],
// from local facts only.
func (s *Source) host() (string, error) {
	if err := s.cfg.check(); err != nil {
		return "", err
	}
	c := s.cfg.withDefaults()
	h, from := c.Host, "Config.Host"
	if h == "" {
		in := host.Detect(c.Root, nil)
		switch {
		case in.GCEHost != "":
			h, from = in.GCEHost, HostEnv
		case in.GCE:
			return DefaultHost, nil
		default:
			return "", fmt.Errorf("gcemeta: not on GCE (%s), and neither Config.Host nor %s is set: %w",
				host.ReadBIOS(c.Root).Quote("product_name"), HostEnv, termsig.ErrUnavailable)
		}
	}
	if u, err := url.Parse("http://" + h + "/"); err != nil || u.Host != h || u.User != nil {
		return "", fmt.Errorf("gcemeta: %s %q is not a host[:port]", from, h)
	}
	return h, nil
}

// start works out the configuration of one Watch with r.
func (s *Source) start(r *termsig.Run) (*watcher, error) {
	h, err := s.host()
	if err != nil {
		return nil, err
	}
	c := s.cfg.withDefaults()
	w := &watcher{
		cfg:        c,
		log:        c.Logger,
		host:       h,
		base:       "http://" + h + "/computeMetadata/v1/",
		hc:         c.HTTPClient,
		timeoutSec: int((c.WaitTimeout + time.Second - 1) / time.Second),
		run:        r,
		health:     health.New(r, len(keys)),
	}
	if w.hc == nil {
		w.ownTransport = httpguard.NewTransport(2*time.Second, len(keys), c.dnsDial)
		w.hc = &http.Client{Transport: w.ownTransport}
	}
	// Redirects refused and answers cut off, whoever made the client.
	w.hc, w.unguard = httpguard.Guard(w.hc, maxBody)
	return w, nil
}

// A watcher is one Watch call.
type watcher struct {
	cfg          Config // with the defaults applied
	log          *slog.Logger
	host         string
	base         string // "http://host/computeMetadata/v1/"
	hc           *http.Client
	ownTransport *http.Transport // nil when the client is the caller's
	unguard      func()          // closes what httpguard.Guard made for hc
	timeoutSec   int             // WaitTimeout in whole seconds, rounded up
	run          *termsig.Run

	// health holds each key's state, a part numbered as in keys: the
	// source reports the error of the key that has failed longest, so
	// that an outage that fails every key, one after the other, is one
	// change (the Notifier logs each change).
	health *health.Parts
}

var _ termsig.Detector = (*Source)(nil)

// isNotFound is errors.As for metadata.NotDefinedError.
func isNotFound(err error) bool {
	var nd notDefined
	return errors.As(err, &nd)
}

package tencent

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/host"
	"github.com/termsig/termsig/internal/httpguard"
	"github.com/termsig/termsig/internal/spotpoll"
)

// Name is the name of the source, in notices and in Notifier.Status.
const Name = "tencent"

// EventTermination is the Event of the source's notices.
const EventTermination = "spot/termination-time"

// DefaultEndpoint is the metadata service of a CVM instance, by the
// address of metadata.tencentyun.com, the name Tencent documents: with an
// address, a poll needs no DNS lookup, so that neither a notice nor Stop
// waits on a resolver that is slow or down.
const DefaultEndpoint = "http://169.254.0.23"

// EndpointEnv is the environment variable that sets the metadata
// service's base URL when [Config.Endpoint] is empty, such as
// "http://127.0.0.1:1342" for a fake, or "http://metadata.tencentyun.com".
// Tencent's own tools have no such variable; this one is termsig's.
const EndpointEnv = "TENCENT_METADATA_ENDPOINT"

// The defaults of the [Config] fields of the same names.
const (
	DefaultInterval       = time.Second
	DefaultRequestTimeout = 2 * time.Second
	DefaultMaxBackoff     = 5 * time.Second
)

// FloorInterval is the shortest Config.Interval that Watch accepts: the
// metadata service is shared by every program of the instance, and a
// reclaim comes two minutes ahead. Tests poll at FloorInterval.
const FloorInterval = 10 * time.Millisecond

const (
	pathTermination = "/latest/meta-data/spot/termination-time"
	userAgent       = "termsig-tencent"
)

// Config configures a [Source]. The zero Config polls this instance's
// termination time every second. A Config that cannot work (see each
// field) makes [Source.Watch] and [Source.Available] return an error that
// starts "tencent: " and names the field; [New] never fails.
type Config struct {
	// Endpoint is the metadata service's base URL, an absolute http or
	// https URL with a host and no path, such as "http://127.0.0.1:1342".
	// Empty means $TENCENT_METADATA_ENDPOINT (see [EndpointEnv]; it must
	// be such a URL too), else [DefaultEndpoint]. Setting either makes
	// the source work on a host that is not recognised as a CVM instance.
	Endpoint string

	// Interval is how often the termination time is polled, start to
	// start. Zero means [DefaultInterval] (1 s): a reclaim is announced
	// two minutes ahead, so a notice comes within a second, half a second
	// on average, at one small request a second. Otherwise it must be at
	// least [FloorInterval].
	Interval time.Duration

	// RequestTimeout bounds one poll, so it is also the longest the first
	// look takes when the service does not answer. Zero means
	// [DefaultRequestTimeout] (2 s); it must not be negative.
	RequestTimeout time.Duration

	// MaxBackoff caps the wait between polls that keep failing: it
	// doubles from Interval up to MaxBackoff, each wait drawn from the
	// upper half of its step. Zero means [DefaultMaxBackoff] (5 s); it
	// must not be negative.
	MaxBackoff time.Duration

	// HTTPClient makes the requests. Nil means a client of the source's
	// own: a direct connection (never through a proxy: the service is
	// link-local), a 2 s dial timeout, lookups that end with their request
	// (for an Endpoint with a name), connections closed when Watch
	// returns. Timeouts come from request contexts, so a client's Timeout
	// must be zero or above RequestTimeout. Whoever made it, redirects are
	// refused, never followed, and answers are cut off past 64 KiB of body
	// or head. Heads are cut off when HTTPClient.Transport is an
	// *http.Transport or nil: the source uses a clone of it, whose
	// connections are closed when Watch returns. Another RoundTripper
	// bounds heads only if it does so itself.
	HTTPClient *http.Client

	// Logger receives, at debug level, each notice the source sends.
	// Health is not logged here: the source reports it with
	// [termsig.Run.Report], and the Notifier logs each change. Nil means
	// slog.Default().
	Logger *slog.Logger

	// Root is the directory under which the host's files are read (DMI,
	// under sys/class/dmi/id) to recognise a CVM instance when no
	// endpoint is configured. Empty means "/".
	Root string

	// dnsDial dials the DNS server for the source's own client; nil means
	// a net.Dialer (see export_test.go).
	dnsDial httpguard.DialFunc
}

// withDefaults returns c with each zero field set to its default. Invalid
// values are left alone: Available reports them.
func (c Config) withDefaults() Config {
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Root = cmp.Or(c.Root, "/")
	return c
}

// settings returns c for package spotpoll.
func (c Config) settings() spotpoll.Settings {
	return spotpoll.Settings{
		Endpoint: c.Endpoint, Interval: c.Interval, RequestTimeout: c.RequestTimeout, MaxBackoff: c.MaxBackoff, Floor: FloorInterval,
		HTTPClient: c.HTTPClient, Logger: c.Logger, Root: c.Root, DNSDial: c.dnsDial,
	}
}

// spec is what makes the source.
var spec = spotpoll.Spec{
	Name:            Name,
	Host:            "a CVM instance",
	EndpointEnv:     EndpointEnv,
	DefaultEndpoint: DefaultEndpoint,
	On:              func(in host.Info) bool { return in.Tencent },
	Event:           EventTermination,
	Reason:          "spot instance to be reclaimed",
	Parse:           parseTerminationTime,
}

// A Source watches a Tencent Cloud CVM spot instance's termination time:
// a [termsig.Source] named "tencent". See the package documentation for
// the notices it sends. Create it with [New].
//
// A Source holds no state between Watch calls; Watch may be called by
// several goroutines at once, each call watching on its own.
type Source struct {
	cfg Config // as given to New
}

// New returns a Source configured by cfg. It does not check cfg: Watch
// does, so that a mistake shows as a failed source in Notifier.Status.
func New(cfg Config) *Source { return &Source{cfg: cfg} }

// Name returns "tencent".
func (s *Source) Name() string { return Name }

// Available returns, without touching the network, the error that Watch
// would return at once, or nil: an error that does not wrap
// termsig.ErrUnavailable if the Config cannot work, whatever the host;
// nil when an endpoint is configured (Config.Endpoint or
// TENCENT_METADATA_ENDPOINT) or the firmware's product name says "Tencent
// Cloud CVM" (DMI on Linux, the registry's BIOS values on Windows);
// otherwise an error wrapping termsig.ErrUnavailable.
func (s *Source) Available() error { return spec.Available(s.cfg.withDefaults().settings()) }

// Watch polls the termination time until ctx is done, then returns
// ctx.Err(); see the package documentation for what it sends. It returns
// at once an error wrapping termsig.ErrUnavailable when [Source.Available]
// says so, and another error, starting "tencent: ", when the Config
// cannot work. It calls [termsig.Run.Ready] once the first poll has been
// answered (and its notice sent) or has failed: the first look needs the
// network, so the Source has no Traits method and termsig.New does not
// wait for it.
func (s *Source) Watch(ctx context.Context, r *termsig.Run) error {
	if err := s.Available(); err != nil {
		return err
	}
	c := s.cfg.withDefaults()
	header := http.Header{"User-Agent": {userAgent}}
	return spec.Watch(ctx, r, c.settings(), func(client *spotpoll.Client, base string) func(context.Context) (spotpoll.Answer, error) {
		return func(ctx context.Context) (spotpoll.Answer, error) {
			return client.Get(ctx, base+pathTermination, header, c.RequestTimeout)
		}
	})
}

var _ termsig.Detector = (*Source)(nil)

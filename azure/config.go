package azure

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/termsig/termsig/internal/httpguard"
)

// The defaults of the [Config] fields of the same names.
const (
	DefaultEndpoint            = "http://169.254.169.254"
	DefaultInterval            = time.Second
	DefaultRequestTimeout      = 2 * time.Second
	DefaultFirstRequestTimeout = 130 * time.Second
	DefaultMaxBackoff          = 10 * time.Second
)

// EndpointEnv is the environment variable that sets the metadata
// service's base URL when [Config.Endpoint] is empty, such as
// "http://127.0.0.1:8080" for a fake. Azure's own tools have no such
// variable; this one is termsig's.
const EndpointEnv = "AZURE_METADATA_ENDPOINT"

// FloorInterval is the shortest Config.Interval that Watch accepts. Azure
// throttles the metadata service (about 5 requests a second per VM), and
// a preemption comes at least 30 s ahead: polling faster gains nothing.
// Tests poll at FloorInterval.
const FloorInterval = 10 * time.Millisecond

// Config configures a [Source]. The zero Config polls this VM's scheduled
// events every second. A Config that cannot work (see each field) makes
// [Source.Watch] and [Source.Available] return an error that names the
// field; [New] never fails.
type Config struct {
	// Endpoint is the metadata service's base URL, an absolute http or
	// https URL with a host and no path, such as "http://127.0.0.1:8080".
	// Empty means $AZURE_METADATA_ENDPOINT (see [EndpointEnv]; it must be
	// such a URL too), else [DefaultEndpoint]. Setting either makes the
	// source work on a host that is not recognised as an Azure VM.
	Endpoint string

	// VMName is this VM's name as the events' Resources list it, used as
	// given. Empty means the name the metadata service gives
	// (/metadata/instance/compute/name), read when Watch starts and
	// retried until it is known (no event is reported before), and read
	// again until an event names it; see the package documentation.
	VMName string

	// Interval is how often the scheduled events are polled, start to
	// start. Zero means [DefaultInterval] (1 s); otherwise it must be at
	// least [FloorInterval].
	Interval time.Duration

	// RequestTimeout bounds each request once the service has answered
	// once. Zero means [DefaultRequestTimeout] (2 s); it must not be
	// negative.
	RequestTimeout time.Duration

	// FirstRequestTimeout bounds the requests until the scheduled events
	// have answered once: the first call on a VM enables the service and
	// can take up to two minutes. Zero means
	// [DefaultFirstRequestTimeout] (130 s); it must not be negative.
	FirstRequestTimeout time.Duration

	// MaxBackoff caps the wait between requests that keep failing: it
	// doubles from Interval up to MaxBackoff. Zero means
	// [DefaultMaxBackoff] (10 s); it must not be negative.
	MaxBackoff time.Duration

	// HTTPClient makes the requests. Nil means a client of the source's
	// own: a direct connection (no proxy, which the metadata service
	// refuses), a 2 s dial timeout, connections closed when Watch returns.
	// Whoever made it, redirects are refused and answers are cut off past
	// 1 MiB of body or 64 KiB of head. Heads are cut off when
	// HTTPClient.Transport is an *http.Transport or nil: the source uses a
	// clone of it, whose connections are closed when Watch returns.
	// Another RoundTripper bounds heads only if it does so itself
	// (net/http's default is 10 MiB, which can cost a hundred times that
	// in memory).
	HTTPClient *http.Client

	// Logger receives, at debug level, each notice the source sends, and
	// events for other VMs as they are skipped. Health is not logged
	// here: the source reports it with [termsig.Run.Report], and the
	// Notifier logs each change. Nil means slog.Default().
	Logger *slog.Logger

	// Root is the directory under which the host's files are read (DMI,
	// under sys/class/dmi/id) to recognise an Azure VM when no endpoint is
	// configured. Empty means "/".
	Root string

	// dnsDial dials the DNS server for the source's own client; nil means
	// a net.Dialer (see export_test.go).
	dnsDial httpguard.DialFunc

	// nameInterval is how often a VM name that no event has named yet is
	// read again; zero means defaultNameInterval (see export_test.go).
	nameInterval time.Duration
}

// defaultNameInterval is how often the VM's name is read again until an
// event names it: one request in hundreds of polls.
const defaultNameInterval = 10 * time.Minute

// withDefaults returns c with each zero field set to its default. Invalid
// values are left alone: validate reports them.
func (c Config) withDefaults() Config {
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.FirstRequestTimeout = cmp.Or(c.FirstRequestTimeout, DefaultFirstRequestTimeout)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Root = cmp.Or(c.Root, "/")
	c.nameInterval = cmp.Or(c.nameInterval, defaultNameInterval)
	return c
}

// endpoint returns the base URL the source uses and where it came from
// ("" when it is the default).
func (c Config) endpoint() (base, from string) {
	if c.Endpoint != "" {
		return c.Endpoint, "Config.Endpoint"
	}
	if e := os.Getenv(EndpointEnv); e != "" {
		return e, EndpointEnv
	}
	return DefaultEndpoint, ""
}

// base returns the endpoint without a trailing slash, for the paths to
// follow.
func (c Config) base() string {
	b, _ := c.endpoint()
	return strings.TrimRight(b, "/")
}

// validate returns what makes c unable to work, or nil. Every error
// starts "azure: " and names the field.
func (c Config) validate() error {
	if base, from := c.endpoint(); from != "" {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" ||
			strings.ContainsAny(base, "?#") || u.User != nil {
			return fmt.Errorf("azure: %s %q is not an absolute http or https URL with a host and no path, query or fragment", from, base)
		}
	}
	for _, d := range []struct {
		name  string
		value time.Duration
		floor time.Duration
	}{
		{"Interval", c.Interval, FloorInterval},
		{"RequestTimeout", c.RequestTimeout, 0},
		{"FirstRequestTimeout", c.FirstRequestTimeout, 0},
		{"MaxBackoff", c.MaxBackoff, 0},
	} {
		switch {
		case d.value < 0:
			return fmt.Errorf("azure: Config.%s is negative (%v)", d.name, d.value)
		case d.value > 0 && d.value < d.floor:
			return fmt.Errorf("azure: Config.%s %v is below FloorInterval (%v): it would hammer the metadata service", d.name, d.value, d.floor)
		}
	}
	return nil
}

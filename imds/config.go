package imds

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/termsig/termsig/internal/host"
	"github.com/termsig/termsig/internal/httpguard"
)

// The defaults of the [Config] fields of the same names.
const (
	DefaultInterval         = time.Second
	DefaultAdvisoryInterval = 3 * time.Second
	DefaultRequestTimeout   = 2 * time.Second
	DefaultMaxBackoff       = 10 * time.Second
)

// The intervals that are no knob: see Cadence in the package documentation.
const (
	defaultFastInterval        = 250 * time.Millisecond
	defaultMaintenanceInterval = 30 * time.Second
)

// FloorInterval is the shortest interval of a [Config] that Watch
// accepts. IMDS throttles each instance, and its link-local traffic
// shares one packet allowance with DNS and NTP: polling faster
// would hammer the metadata service (and starve DNS) for no gain, since a
// spot interruption comes about two minutes ahead. Tests poll at
// FloorInterval.
const FloorInterval = 10 * time.Millisecond

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
// default intervals on the SDK's default endpoint. A Config that cannot
// work (see each field) makes [Source.Watch] and [Source.Available] return
// an error that names the field; [New] never fails.
type Config struct {
	// Endpoint is the IMDS base URL, such as "http://127.0.0.1:1338": an
	// absolute http or https URL with a host. Empty means the SDK's
	// default: AWS_EC2_METADATA_SERVICE_ENDPOINT if set (it must be such
	// a URL too), else http://169.254.169.254. Set it (to that URL) on an
	// EC2 Mac instance, whose firmware the source cannot read, and to
	// point the source at a fake such as package imdstest.
	Endpoint string

	// HTTPClient sends the requests of the SDK client that each Watch
	// makes (IMDSv2 tokens, a 401 tried again at once with a fresh token
	// and no other retries: see the package documentation). Nil means a
	// client of the Source's own for each Watch, which dials directly
	// (never through a proxy: IMDS is link-local) with a 250 ms connect
	// timeout, as the SDK does, each dial ending with its request,
	// resolves names on Linux with Go's resolver, each lookup ending with
	// its request too (so a DNS server that does not answer does not hold
	// Stop), and whose idle connections are closed when Watch returns.
	// Timeouts come from request contexts, so a client's Timeout must be
	// zero or above RequestTimeout.
	//
	// Either client is used through a copy whose transport refuses
	// redirects (a 3xx answer is an error such as "imds: redirect refused
	// (HTTP 302)", never followed nor tried again, so the token stays with
	// the endpoint and another host's answer makes no notice) and cuts off
	// an answer whose body is longer than 1 MiB (an error, "answer larger
	// than 1 MiB"; Stop stays prompt while an endless answer streams) or
	// whose head is longer than 64 KiB, before the SDK, which reads each
	// answer whole, sees it; HTTPClient itself is not changed. A token
	// answer that is cut off leaves the SDK to go on without a token, as
	// IMDSv1, so the error shown is that of the request after it,
	// typically a 401. Heads are cut off when HTTPClient.Transport is an
	// *http.Transport or nil: the copy uses a clone of it, whose
	// connections are closed when Watch returns. Another RoundTripper
	// bounds heads only if it does so itself (net/http's default is 10
	// MiB, which can cost a hundred times that in memory).
	HTTPClient *http.Client

	// Interval is how often spot/instance-action is polled, start to
	// start, and autoscaling/target-lifecycle-state once it has answered
	// 200 (the instance is in an Auto Scaling group). Zero means
	// [DefaultInterval] (1 s); otherwise it must be at least
	// [FloorInterval] (10 ms). From the lifecycle state's first 200 on,
	// it is polled every Interval even if it answers 404 again. While
	// advice holds (see Cadence in the package documentation) those paths
	// are polled every 250 ms, or every Interval if that is shorter, from
	// the moment the advice is seen; a path that is failing keeps its
	// backoff.
	Interval time.Duration

	// AdvisoryInterval is how often events/recommendations/rebalance is
	// polled, and autoscaling/target-lifecycle-state while it answers 404
	// (the instance is in no Auto Scaling group). Zero means
	// [DefaultAdvisoryInterval] (3 s); otherwise it must be at least
	// FloorInterval. So on an instance attached to a group after Watch
	// started, the first lifecycle state (a Terminated included, if the
	// group scales the instance in at once) is seen up to
	// AdvisoryInterval after it appears, rather than Interval or 250 ms.
	AdvisoryInterval time.Duration

	// RequestTimeout bounds one poll of one path, a retry after a 401
	// included, so it is also the longest the source takes to have its
	// first look when IMDS does not answer. Zero means
	// [DefaultRequestTimeout] (2 s); it must not be negative.
	RequestTimeout time.Duration

	// MaxBackoff caps the wait between polls of a path that keeps failing:
	// after n failures in a row the wait is the path's interval times
	// 2^(n-1), up to MaxBackoff (or the interval, if that is longer). The
	// urgent paths are capped further, at 4×Interval, so that throttling
	// delays a spot interruption by seconds, not a tenth of its notice.
	// Zero means [DefaultMaxBackoff] (10 s); it must not be negative.
	MaxBackoff time.Duration

	// Events selects what to watch. Zero means AllEvents; other bits than
	// those of AllEvents are an error.
	Events Events

	// Logger receives, at debug level, each notice the source sends.
	// Health is not logged here: the source reports it with
	// [termsig.Run.Report], and the Notifier logs each change. Nil means
	// slog.Default(), as it is when Watch starts.
	Logger *slog.Logger

	// Root is the directory under which the host's files are read (DMI,
	// under sys/class/dmi/id) when no endpoint is configured, to tell
	// from the firmware whether the host is an EC2 instance. Empty means
	// "/". Set it when the program runs in a container that sees the
	// host's root filesystem under another directory, such as /host.
	Root string

	// fastInterval replaces Interval while advice holds, and
	// maintenanceInterval is how often events/maintenance/scheduled is
	// polled; zero means their defaults, and they must be at least
	// FloorInterval. Tests set them (see export_test.go).
	fastInterval        time.Duration
	maintenanceInterval time.Duration

	// dnsDial dials the DNS server for the lookups of the source's own
	// client; nil means a net.Dialer. Tests point it at a server of their
	// own (see export_test.go).
	dnsDial httpguard.DialFunc
}

// withDefaults returns c with each zero field set to its default: the one
// place where defaults are applied. Invalid values are left alone:
// validate reports them.
func (c Config) withDefaults() Config {
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.fastInterval = cmp.Or(c.fastInterval, defaultFastInterval)
	c.AdvisoryInterval = cmp.Or(c.AdvisoryInterval, DefaultAdvisoryInterval)
	c.maintenanceInterval = cmp.Or(c.maintenanceInterval, defaultMaintenanceInterval)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	c.Events = cmp.Or(c.Events, AllEvents)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Root = cmp.Or(c.Root, "/")
	return c
}

// validate returns what makes c unable to work, or nil. It checks c as
// given to New (zero still means the default), and the endpoint that the
// SDK would take from the environment (in.IMDSEndpoint) when c does not
// name one. Every error starts "imds: " and names the field, so that the
// one line the Notifier logs says what to fix.
func (c Config) validate(in host.Info) error {
	if c.Endpoint != "" {
		if err := checkEndpoint("Config.Endpoint", c.Endpoint); err != nil {
			return err
		}
	} else if !in.IMDSDisabled && in.IMDSEndpoint != "" {
		if err := checkEndpoint("AWS_EC2_METADATA_SERVICE_ENDPOINT", in.IMDSEndpoint); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		name  string
		value time.Duration
		floor time.Duration
	}{
		{"Interval", c.Interval, FloorInterval},
		{"AdvisoryInterval", c.AdvisoryInterval, FloorInterval},
		{"fastInterval", c.fastInterval, FloorInterval},
		{"maintenanceInterval", c.maintenanceInterval, FloorInterval},
		{"RequestTimeout", c.RequestTimeout, 0},
		{"MaxBackoff", c.MaxBackoff, 0},
	} {
		switch {
		case d.value < 0:
			return fmt.Errorf("imds: Config.%s is negative (%v)", d.name, d.value)
		case d.value > 0 && d.value < d.floor:
			return fmt.Errorf("imds: Config.%s %v is below FloorInterval (%v): it would hammer the metadata service", d.name, d.value, d.floor)
		}
	}
	switch {
	case c.Events != 0 && c.Events&AllEvents == 0:
		return fmt.Errorf("imds: Config.Events %#x selects no known event (AllEvents is %#x)", uint8(c.Events), uint8(AllEvents))
	case c.Events&^AllEvents != 0:
		return fmt.Errorf("imds: Config.Events %#x has bits outside AllEvents (%#x)", uint8(c.Events), uint8(AllEvents))
	}
	return nil
}

// checkEndpoint returns an error naming what if v is not an absolute http
// or https URL with a host, which is what the SDK needs to make requests
// (it would otherwise fail every poll, or poll a relative path).
func checkEndpoint(what, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("imds: %s %q is not an absolute http or https URL with a host", what, v)
	}
	return nil
}

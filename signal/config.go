package signal

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/termsig/termsig"
)

// StopTimeoutEnv is the environment variable that gives how long the
// process has after SIGTERM before it is killed, when [Config.StopTimeout]
// does not say: whole seconds ("30", as Kubernetes' terminationGracePeriodSeconds,
// ECS's stopTimeout and `docker stop -t` count) or a Go duration ("1m30s").
const StopTimeoutEnv = "TERMSIG_STOP_TIMEOUT"

// DefaultAddress is the system bus's address when neither Config.Address
// nor DBUS_SYSTEM_BUS_ADDRESS says otherwise (the D-Bus specification's
// default).
const DefaultAddress = "unix:path=/var/run/dbus/system_bus_socket"

// DefaultLookupTimeout bounds the systemd lookup when Config.LookupTimeout
// is not set.
const DefaultLookupTimeout = 2 * time.Second

// The environment variables the lookup reads.
const (
	addressEnv    = "DBUS_SYSTEM_BUS_ADDRESS"
	invocationEnv = "INVOCATION_ID" // set by systemd for the processes of a unit
)

// The defaults of the Config fields that only tests set (export_test.go).
const (
	defaultRetry    = time.Second
	defaultMaxRetry = 30 * time.Second
)

// Config configures a [Source]. The zero Config is ready to use: see the
// package documentation, "Deadlines", for what it does.
type Config struct {
	// StopTimeout is how long the process has after SIGTERM before it is
	// killed: a SIGTERM's notice has Deadline Observed plus StopTimeout.
	// Zero means the environment variable TERMSIG_STOP_TIMEOUT, and
	// without it, under systemd, the unit's own stop timeout; negative
	// means no deadline, whatever the environment or systemd say, and no
	// lookup.
	StopTimeout time.Duration

	// Address is the D-Bus address of the system bus on which systemd is
	// asked for the unit's stop timeout, such as
	// "unix:path=/run/dbus/system_bus_socket" (only unix:path= and
	// unix:abstract= entries are dialled). Empty means the environment
	// variable DBUS_SYSTEM_BUS_ADDRESS, and without it DefaultAddress.
	Address string

	// LookupTimeout bounds one lookup: connecting to the bus and every
	// call. Values below 1 mean DefaultLookupTimeout (2 s).
	LookupTimeout time.Duration

	// Logger receives one line with what the lookup found (Info), or why
	// it found no deadline for a process that systemd started (Warn), and
	// one Warn line for a TERMSIG_STOP_TIMEOUT it cannot read. Nil means
	// slog.Default().
	Logger *slog.Logger

	// retry and maxRetry bound the wait before a lookup that failed
	// for a passing reason is tried again (export_test.go sets them).
	retry, maxRetry time.Duration
}

// New returns a Source configured by c for sigs; see the function New.
func (c Config) New(sigs ...os.Signal) *Source {
	if len(sigs) == 0 {
		sigs = defaultSignals()
	}
	m := make(map[os.Signal]termsig.Kind, len(sigs))
	for _, s := range sigs {
		m[s] = kindOf(s)
	}
	return c.NewMap(m)
}

// NewMap returns a Source configured by c for the signals in m; see the
// function NewMap.
func (c Config) NewMap(m map[os.Signal]termsig.Kind) *Source {
	if len(m) == 0 {
		panic("termsig: signal.NewMap with no signals")
	}
	s := &Source{cfg: c, kinds: make(map[os.Signal]termsig.Kind, len(m))}
	for sig, k := range m {
		if sig == nil {
			panic("termsig: signal.NewMap with a nil signal")
		}
		s.kinds[sig] = k
		s.sigs = append(s.sigs, sig)
	}
	return s
}

// withDefaults returns c with every unset field at its default.
func (c Config) withDefaults() Config {
	if c.Address == "" {
		c.Address = os.Getenv(addressEnv)
	}
	if c.Address == "" {
		c.Address = DefaultAddress
	}
	if c.LookupTimeout < 1 {
		c.LookupTimeout = DefaultLookupTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.retry <= 0 {
		c.retry = defaultRetry
	}
	if c.maxRetry <= 0 {
		c.maxRetry = defaultMaxRetry
	}
	return c
}

// parseStopTimeout reads a value of TERMSIG_STOP_TIMEOUT: whole seconds
// or a Go duration, not negative. Zero is a timeout of zero: the process
// may be killed at once.
func parseStopTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		if n > uint64(maxTimeout/time.Second) {
			return 0, fmt.Errorf("signal: %s=%q: too long", StopTimeoutEnv, v)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, fmt.Errorf("signal: %s=%q: want whole seconds (\"30\") or a Go duration (\"1m30s\")", StopTimeoutEnv, v)
	case d < 0:
		return 0, fmt.Errorf("signal: %s=%q: negative", StopTimeoutEnv, v)
	}
	return d, nil
}

// maxTimeout is the longest stop timeout taken: a deadline beyond it
// (about 292 years) is no deadline.
const maxTimeout = time.Duration(1<<63 - 1)

package logind

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
)

// DefaultAddress is the system bus's address when neither Config.Address
// nor DBUS_SYSTEM_BUS_ADDRESS says otherwise (the D-Bus specification's
// default).
const DefaultAddress = "unix:path=" + defaultSocket

const defaultSocket = "/var/run/dbus/system_bus_socket"

// addressEnv is the environment variable of the system bus's address.
const addressEnv = "DBUS_SYSTEM_BUS_ADDRESS"

// DefaultRequestTimeout bounds connecting to the bus and each call on it
// when Config.RequestTimeout is not set.
const DefaultRequestTimeout = 5 * time.Second

// DefaultScheduledInterval is how often the source reads logind's
// ScheduledShutdown when Config.ScheduledInterval is not set.
const DefaultScheduledInterval = 10 * time.Second

// DefaultInhibitDelay is logind's default InhibitDelayMaxSec, used for the
// Deadline when the property cannot be read. The operator raises the delay
// in a logind.conf drop-in, such as /etc/systemd/logind.conf.d/termsig.conf
// with "[Login]" and "InhibitDelayMaxSec=120"; a drain that keeps a margin
// larger than the delay has no time left.
const DefaultInhibitDelay = 5 * time.Second

// The defaults of the Config fields that only tests set (export_test.go).
const (
	defaultBackoff    = 100 * time.Millisecond
	defaultMaxBackoff = 10 * time.Second
)

// Config configures a [Source]. The zero Config is ready to use.
type Config struct {
	// Address is the D-Bus address of the system bus, such as
	// "unix:path=/run/dbus/system_bus_socket": a list of transport:key=value
	// entries as the D-Bus specification and DBUS_SYSTEM_BUS_ADDRESS spell
	// it, not a URL, hence not Endpoint as in the HTTP sources. Empty
	// means the environment variable DBUS_SYSTEM_BUS_ADDRESS, and without
	// it DefaultAddress. A program in a container that sees the host's bus
	// socket under another path sets it.
	Address string

	// Root is where the default socket is looked for when neither Address
	// nor DBUS_SYSTEM_BUS_ADDRESS is set: run/dbus/system_bus_socket below
	// Root, else var/run/dbus/system_bus_socket (on the host /var/run is a
	// symbolic link to /run, which would lead out of Root). Empty means
	// "/": DefaultAddress. A program in a container that sees the host's
	// root filesystem under another directory, such as /host, sets it.
	Root string

	// Who and Why describe the delay lock to the operator (systemd-inhibit
	// --list). Empty Who means the program's name; empty Why means
	// "handing back work before shutdown".
	Who, Why string

	// NoLock makes the source hear shutdowns without holding them: it
	// takes no delay lock, and Release does nothing. A program that only
	// reports shutdowns, or that cannot release in time, sets it, so that
	// it does not hold every shutdown of the host for InhibitDelayMaxSec.
	NoLock bool

	// ScheduledInterval is how often the source reads logind's
	// ScheduledShutdown, which systemd 252 and its like change without a
	// signal (a logind that sends PropertiesChanged for it is heard at
	// once as well). Values below 1 mean DefaultScheduledInterval (10 s):
	// a shutdown scheduled a minute ahead (`shutdown -h +1`) is seen 50 s
	// ahead at least; one scheduled closer than an interval may be heard
	// only when it fires.
	ScheduledInterval time.Duration

	// RequestTimeout bounds one exchange with the bus: connecting to it,
	// and each call on it. Values below 1 mean DefaultRequestTimeout (5 s).
	RequestTimeout time.Duration

	// Logger receives a warning when a process other than logind sends
	// this program logind's signals (they are ignored), one line when
	// logind refuses the delay lock (as when polkit's action
	// org.freedesktop.login1.inhibit-delay-shutdown, which systemd's
	// default policy grants to everyone, says no), and one when
	// ListInhibitors fails as a shutdown begins. Nil means
	// slog.Default().
	Logger *slog.Logger

	// backoff and maxBackoff bound the wait before reconnecting after
	// the bus went away (export_test.go sets them).
	backoff, maxBackoff time.Duration

	// addressFrom is where Address came from, "Config.Address" or the
	// environment variable, for check's errors (DefaultAddress, and the
	// one made from Root, are always good): withDefaults sets it.
	addressFrom string
}

// withDefaults returns c with every unset field at its default.
func (c Config) withDefaults() Config {
	c.addressFrom = "Config.Address"
	if c.Address == "" {
		c.Address, c.addressFrom = os.Getenv(addressEnv), addressEnv
	}
	if c.Address == "" {
		c.Address = DefaultAddress
		if c.Root != "" && c.Root != "/" {
			// /var/run is a symbolic link to /run, absolute, so it
			// leads out of Root: /run first.
			c.Address = "unix:path=" + dbus.EscapeBusAddressValue(filepath.Join(c.Root, "/run/dbus/system_bus_socket")) +
				";unix:path=" + dbus.EscapeBusAddressValue(filepath.Join(c.Root, defaultSocket))
		}
	}
	if c.Who == "" {
		c.Who = filepath.Base(os.Args[0])
	}
	if c.Why == "" {
		c.Why = "handing back work before shutdown"
	}
	if c.RequestTimeout < 1 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ScheduledInterval < 1 {
		c.ScheduledInterval = DefaultScheduledInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.backoff <= 0 {
		c.backoff = defaultBackoff
	}
	if c.maxBackoff <= 0 {
		c.maxBackoff = defaultMaxBackoff
	}
	return c
}

// check reports a Config that cannot work: an address that is not a D-Bus
// address this package can dial. c has its defaults.
func (c Config) check() error {
	if _, err := parseAddress(c.Address); err != nil {
		return fmt.Errorf("logind: %s: %w", c.addressFrom, err)
	}
	return nil
}

// present returns nil if the bus may be there: one of its sockets exists,
// or its address has a transport that only connecting can check. c has
// its defaults and passed check.
func (c Config) present() error {
	eps, _ := parseAddress(c.Address)
	var paths []string
	for _, ep := range eps {
		if ep.path == "" {
			return nil // abstract or tcp: only connecting tells
		}
		if fi, err := os.Stat(ep.path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		paths = append(paths, ep.path)
	}
	return fmt.Errorf("logind: no system bus (no socket at %s): %w", strings.Join(paths, ", "), termsig.ErrUnavailable)
}

package signal

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// The names systemd is reached by on the system bus
// (org.freedesktop.systemd1(5)).
const (
	systemdName  = "org.freedesktop.systemd1"
	systemdPath  = dbus.ObjectPath("/org/freedesktop/systemd1")
	managerIface = systemdName + ".Manager"
	unitIface    = systemdName + ".Unit"
	serviceIface = systemdName + ".Service"
	propsGet     = "org.freedesktop.DBus.Properties.Get"
)

// D-Bus error names that asking again does not change.
var permanentErrors = []string{
	systemdName + ".NoUnitForPID", // the process is in no unit
	"org.freedesktop.DBus.Error.AccessDenied",
	"org.freedesktop.DBus.Error.InvalidArgs",
	"org.freedesktop.DBus.Error.UnknownMethod",
	"org.freedesktop.DBus.Error.UnknownObject",
	"org.freedesktop.DBus.Error.UnknownInterface",
	"org.freedesktop.DBus.Error.UnknownProperty",
}

// lookupUnit asks systemd, within c.LookupTimeout, which unit this process
// is in and what stopping it does: which signal starts the stop, and how
// long after it comes SIGKILL. invocation is $INVOCATION_ID.
func lookupUnit(ctx context.Context, c Config, invocation string) (unit, error) {
	ctx, cancel := context.WithTimeout(ctx, c.LookupTimeout)
	defer cancel()
	conn, err := dialBus(ctx, c.Address)
	if err != nil {
		return unit{}, err
	}
	defer conn.Close()

	// PID 0 is the caller as the bus daemon sees it (its socket's peer
	// credentials): right also in a PID namespace of its own, where
	// os.Getpid would name another process of the host.
	var path dbus.ObjectPath
	if err := conn.Object(systemdName, systemdPath).CallWithContext(ctx, managerIface+".GetUnitByPID", 0, uint32(0)).Store(&path); err != nil {
		return unit{}, callError("GetUnitByPID", err)
	}
	obj := conn.Object(systemdName, path)
	var u unit
	if u.name, err = property[string](ctx, obj, unitIface, "Id"); err != nil {
		return unit{}, err
	}
	mainPID, err := property[uint32](ctx, obj, serviceIface, "MainPID")
	var de dbus.Error
	if errors.As(err, &de) && de.Name == "org.freedesktop.DBus.Error.UnknownProperty" {
		return unit{}, &permanentError{fmt.Errorf("signal: this process is in %s, not in a service", u.name)}
	}
	if err != nil {
		return unit{}, err
	}
	main := mainPID == uint32(os.Getpid())
	if !main {
		// Not the main process: a child of the service, if the unit is the
		// one whose INVOCATION_ID it inherited. The system manager's unit
		// of a user service is user@UID.service, whose invocation differs.
		id, err := property[[]byte](ctx, obj, unitIface, "InvocationID")
		if err != nil {
			return unit{}, err
		}
		if invocation == "" || !strings.EqualFold(hex.EncodeToString(id), invocation) {
			return unit{}, &permanentError{fmt.Errorf("signal: this process is neither the main process of %s nor started by it (INVOCATION_ID); a user service's stop timeout is not on the system bus", u.name)}
		}
	}
	usec, err := property[uint64](ctx, obj, serviceIface, "TimeoutStopUSec")
	if err != nil {
		return unit{}, err
	}
	sig, err := property[int32](ctx, obj, serviceIface, "KillSignal")
	if err != nil {
		return unit{}, err
	}
	sigkill, err := property[bool](ctx, obj, serviceIface, "SendSIGKILL")
	if err != nil {
		return unit{}, err
	}
	mode, err := property[string](ctx, obj, serviceIface, "KillMode")
	if err != nil {
		return unit{}, err
	}
	if sig < 1 || sig > 64 {
		return unit{}, &permanentError{fmt.Errorf("signal: %s has KillSignal %d, which is no signal", u.name, sig)}
	}
	switch {
	case usec == math.MaxUint64 || usec > uint64(maxTimeout/time.Microsecond):
		u.why = "TimeoutStopSec=infinity"
	case !sigkill:
		u.why = "SendSIGKILL=no"
	case mode == "none":
		u.why = "KillMode=none"
	case mode == "process" && !main:
		u.why = "KillMode=process, and this is not the main process"
	default:
		u.rule = stopRule{sig: syscall.Signal(sig), timeout: time.Duration(usec) * time.Microsecond}
	}
	return u, nil
}

// property reads one property of obj, of type T.
func property[T any](ctx context.Context, obj dbus.BusObject, iface, name string) (T, error) {
	var zero T
	var v dbus.Variant
	if err := obj.CallWithContext(ctx, propsGet, 0, iface, name).Store(&v); err != nil {
		return zero, callError(name, err)
	}
	t, ok := v.Value().(T)
	if !ok {
		return zero, &permanentError{fmt.Errorf("signal: systemd's %s is of type %s, not %T", name, v.Signature(), zero)}
	}
	return t, nil
}

// callError names what failed, and marks the failures that last.
func callError(what string, err error) error {
	var de dbus.Error
	if !errors.As(err, &de) {
		return fmt.Errorf("signal: systemd's %s: %w", what, err)
	}
	err = fmt.Errorf("signal: systemd's %s: %s: %w", what, de.Name, err)
	if slices.Contains(permanentErrors, de.Name) {
		return &permanentError{err}
	}
	return err
}

// dialBus connects to the first unix: entry of address that answers, and
// authenticates, before ctx ends. A bus whose socket is missing is a
// permanent failure (there is no bus here), one that refuses or hangs is not.
func dialBus(ctx context.Context, address string) (*dbus.Conn, error) {
	err := fmt.Errorf("signal: %q has no unix:path= or unix:abstract= entry", address)
	missing := true
	for entry := range strings.SplitSeq(address, ";") {
		name, ok := unixSocket(entry)
		if !ok {
			continue
		}
		var d net.Dialer
		var nc net.Conn
		if nc, err = d.DialContext(ctx, "unix", name); err != nil {
			missing = missing && errors.Is(err, syscall.ENOENT)
			continue
		}
		// WithContext: godbus closes the connection when ctx ends, which
		// ends a handshake or a call that hangs.
		conn, err := dbus.NewConn(&cappedConn{Conn: nc, left: maxRead}, dbus.WithContext(ctx))
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("signal: system bus: %w", err)
		}
		if err = conn.Auth(nil); err == nil {
			err = conn.Hello()
		}
		if err != nil {
			conn.Close()
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return nil, fmt.Errorf("signal: system bus: handshake: %w", err)
		}
		return conn, nil
	}
	if missing {
		return nil, &permanentError{fmt.Errorf("%w: %w", errNoBus, err)}
	}
	return nil, fmt.Errorf("signal: system bus: %w", err)
}

// unixSocket returns the socket named by a unix:path= or unix:abstract=
// entry of a D-Bus address.
func unixSocket(entry string) (string, bool) {
	rest, ok := strings.CutPrefix(entry, "unix:")
	if !ok {
		return "", false
	}
	for kv := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(kv, "=")
		v, err := dbus.UnescapeBusAddressValue(v)
		switch {
		case err != nil || v == "":
		case k == "path":
			return v, true
		case k == "abstract":
			return "@" + v, true
		}
	}
	return "", false
}

// maxRead bounds what the lookup reads from the bus: its answers are a few
// kilobytes, and godbus reads a handshake line, or a message up to 128
// MiB, whole.
const maxRead = 1 << 20

// A cappedConn fails its reads once it has read its share.
type cappedConn struct {
	net.Conn
	left int
}

var errTooMuch = fmt.Errorf("signal: the bus sent more than %d bytes", maxRead)

func (c *cappedConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errTooMuch
	}
	n, err := c.Conn.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

// Package systemdtest runs what the signal source asks for a service's
// stop timeout, for real, in a test: a private dbus-daemon ([Bus]) and a
// fake systemd on it ([Systemd]) whose Manager answers GetUnitByPID with
// one unit, a service whose TimeoutStopUSec, KillSignal, KillMode,
// SendSIGKILL, MainPID and InvocationID the test chooses, or with the
// errors systemd gives. It shows every call it answered.
//
// Point the source at it with signal.Config.Address (or
// DBUS_SYSTEM_BUS_ADDRESS) and, to look like a process that systemd
// started, set INVOCATION_ID to [Systemd.InvocationID]; the example shows
// a whole test.
package systemdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig/logind/logindtest"
)

// A Bus is a private dbus-daemon, the test's own system bus; see
// logindtest.Bus, which it is.
type Bus = logindtest.Bus

// StartBus starts a dbus-daemon on a new socket; see logindtest.StartBus.
// It needs the dbus-daemon program (Debian's package dbus).
func StartBus() (*Bus, error) { return logindtest.StartBus() }

// The names systemd is reached by.
const (
	BusName   = "org.freedesktop.systemd1"
	Path      = dbus.ObjectPath("/org/freedesktop/systemd1")
	Interface = "org.freedesktop.systemd1.Manager"
)

// D-Bus error names for [Config.Error].
const (
	// ErrNoUnitForPID is systemd's answer for a process in no unit.
	ErrNoUnitForPID = "org.freedesktop.systemd1.NoUnitForPID"
	// ErrAccessDenied is the bus's (or SELinux's) refusal.
	ErrAccessDenied = "org.freedesktop.DBus.Error.AccessDenied"
)

// Infinity is TimeoutStopUSec for TimeoutStopSec=infinity (UINT64_MAX).
const Infinity = uint64(math.MaxUint64)

// DefaultTimeoutStop is systemd's DefaultTimeoutStopSec.
const DefaultTimeoutStop = 90 * time.Second

// Config configures a fake [Systemd]. The zero Config has one unit,
// "termsig-test.service", of which the caller of GetUnitByPID is the main
// process, stopped with SIGTERM and, 90 s later, SIGKILL.
type Config struct {
	// Unit is the unit's name; empty means "termsig-test.service". A
	// name that does not end in ".service", such as "session-1.scope",
	// has no org.freedesktop.systemd1.Service interface.
	Unit string

	// TimeoutStopUSec is the Service property; 0 means
	// DefaultTimeoutStop (systemd never shows 0: it reads
	// TimeoutStopSec=0 as infinity).
	TimeoutStopUSec uint64

	// KillSignal is the Service's KillSignal; 0 means SIGTERM.
	KillSignal syscall.Signal

	// KillMode is the Service's KillMode; empty means "control-group".
	KillMode string

	// NoSIGKILL makes SendSIGKILL false.
	NoSIGKILL bool

	// MainPID is the Service's MainPID; 0 means the process that asks.
	MainPID uint32

	// InvocationID is the unit's InvocationID as 32 hexadecimal digits,
	// as INVOCATION_ID spells it; empty means a random one.
	InvocationID string

	// Error, if set, is the D-Bus error name with which GetUnitByPID
	// answers, such as ErrNoUnitForPID or ErrAccessDenied.
	Error string

	// Hold, if not nil, makes GetUnitByPID wait until it is closed
	// before it answers: a systemd that hangs. Close it before the test
	// ends.
	Hold <-chan struct{}
}

// A Call is one call the fake answered.
type Call struct {
	Sender string // unique bus name of the caller
	Member string // "GetUnitByPID", or "Get" for a property
	PID    uint32 // GetUnitByPID's argument
	// Interface and Property name the property of a Get.
	Interface, Property string
}

// A Systemd is a fake org.freedesktop.systemd1 on a bus. Its methods are
// safe for concurrent use.
type Systemd struct {
	conn       *dbus.Conn
	cfg        Config
	invocation []byte
	unitPath   dbus.ObjectPath

	mu      sync.Mutex
	calls   []Call
	changed chan struct{} // closed and replaced on every call
}

// New connects to the bus at address, takes the name
// org.freedesktop.systemd1 and serves the Manager and the unit. Close it
// when done.
func New(address string, c Config) (*Systemd, error) {
	if c.Unit == "" {
		c.Unit = "termsig-test.service"
	}
	if c.TimeoutStopUSec == 0 {
		c.TimeoutStopUSec = uint64(DefaultTimeoutStop / time.Microsecond)
	}
	if c.KillSignal == 0 {
		c.KillSignal = syscall.SIGTERM
	}
	if c.KillMode == "" {
		c.KillMode = "control-group"
	}
	s := &Systemd{cfg: c, unitPath: Path + "/unit/" + dbus.ObjectPath(escape(c.Unit)), changed: make(chan struct{})}
	if c.InvocationID == "" {
		s.invocation = make([]byte, 16)
		_, _ = rand.Read(s.invocation)
	} else {
		id, err := hex.DecodeString(c.InvocationID)
		if err != nil || len(id) != 16 {
			return nil, fmt.Errorf("systemdtest: InvocationID %q is not 32 hexadecimal digits", c.InvocationID)
		}
		s.invocation = id
	}
	conn, err := dbus.Connect(address)
	if err != nil {
		return nil, fmt.Errorf("systemdtest: connect: %w", err)
	}
	s.conn = conn
	if err := s.serve(); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

// Start starts a Bus and a fake Systemd on it configured by c, for a
// test: both are closed when tb ends, and tb fails at once if either
// cannot start (dbus-daemon missing included).
func Start(tb testing.TB, c Config) (*Bus, *Systemd) {
	tb.Helper()
	bus, err := StartBus()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { bus.Close() })
	s, err := New(bus.Address(), c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return bus, s
}

func (s *Systemd) serve() error {
	if err := s.conn.Export(manager{s}, Path, Interface); err != nil {
		return err
	}
	if err := s.conn.Export(properties{s}, s.unitPath, "org.freedesktop.DBus.Properties"); err != nil {
		return err
	}
	reply, err := s.conn.RequestName(BusName, dbus.NameFlagDoNotQueue)
	if err != nil {
		return fmt.Errorf("systemdtest: request name: %w", err)
	}
	if reply != dbus.RequestNameReplyPrimaryOwner {
		return fmt.Errorf("systemdtest: %s is taken on this bus", BusName)
	}
	return nil
}

// InvocationID returns the unit's invocation ID as INVOCATION_ID spells
// it: 32 lower-case hexadecimal digits.
func (s *Systemd) InvocationID() string { return hex.EncodeToString(s.invocation) }

// UnitPath returns the unit's object path, as GetUnitByPID answers it.
func (s *Systemd) UnitPath() dbus.ObjectPath { return s.unitPath }

// Calls returns every call answered so far, in order.
func (s *Systemd) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Wait waits until cond, called with Calls whenever a call comes, returns
// true, or ctx is done.
func (s *Systemd) Wait(ctx context.Context, cond func([]Call) bool) error {
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if cond(s.Calls()) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("systemdtest: waiting for calls (%d so far): %w", len(s.Calls()), ctx.Err())
		}
	}
}

// Close leaves the bus, as systemd's end would.
func (s *Systemd) Close() error { return s.conn.Close() }

func (s *Systemd) record(c Call) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// pidOf asks the bus for the process behind a unique name, as systemd
// does for GetUnitByPID(0).
func (s *Systemd) pidOf(sender dbus.Sender) (uint32, *dbus.Error) {
	var pid uint32
	if err := s.conn.BusObject().Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, string(sender)).Store(&pid); err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	return pid, nil
}

// manager is the exported Manager object.
type manager struct{ s *Systemd }

// GetUnitByPID answers the one unit, whatever the PID (0 meaning the
// caller), or Config.Error.
func (m manager) GetUnitByPID(sender dbus.Sender, pid uint32) (dbus.ObjectPath, *dbus.Error) {
	s := m.s
	s.record(Call{Sender: string(sender), Member: "GetUnitByPID", PID: pid})
	if s.cfg.Hold != nil {
		<-s.cfg.Hold
	}
	if s.cfg.Error != "" {
		return "", dbus.NewError(s.cfg.Error, []any{"refused by the test"})
	}
	return s.unitPath, nil
}

// properties is the Properties interface of the unit.
type properties struct{ s *Systemd }

// Get answers a property of the Unit or, for a service, the Service
// interface, with the error sd-bus gives for others.
func (p properties) Get(sender dbus.Sender, iface, name string) (dbus.Variant, *dbus.Error) {
	s := p.s
	s.record(Call{Sender: string(sender), Member: "Get", Interface: iface, Property: name})
	props, err := s.props(sender, iface)
	if err != nil {
		return dbus.Variant{}, err
	}
	v, ok := props[name]
	if !ok {
		return dbus.Variant{}, dbus.NewError("org.freedesktop.DBus.Error.UnknownProperty",
			[]any{fmt.Sprintf("Unknown interface %s or property %s.", iface, name)})
	}
	return v, nil
}

// GetAll answers every property of an interface, as Get does.
func (p properties) GetAll(sender dbus.Sender, iface string) (map[string]dbus.Variant, *dbus.Error) {
	p.s.record(Call{Sender: string(sender), Member: "GetAll", Interface: iface})
	return p.s.props(sender, iface)
}

// Set refuses: the properties are read-only here.
func (properties) Set(_, name string, _ dbus.Variant) *dbus.Error {
	return dbus.NewError("org.freedesktop.DBus.Error.PropertyReadOnly", []any{"Property " + name + " is read-only"})
}

// props returns the properties of iface on the unit.
func (s *Systemd) props(sender dbus.Sender, iface string) (map[string]dbus.Variant, *dbus.Error) {
	switch {
	case iface == "org.freedesktop.systemd1.Unit":
		return map[string]dbus.Variant{
			"Id":           dbus.MakeVariant(s.cfg.Unit),
			"InvocationID": dbus.MakeVariant(s.invocation),
		}, nil
	case iface == "org.freedesktop.systemd1.Service" && strings.HasSuffix(s.cfg.Unit, ".service"):
		main := s.cfg.MainPID
		if main == 0 {
			pid, err := s.pidOf(sender)
			if err != nil {
				return nil, err
			}
			main = pid
		}
		return map[string]dbus.Variant{
			"MainPID":         dbus.MakeVariant(main),
			"TimeoutStopUSec": dbus.MakeVariant(s.cfg.TimeoutStopUSec),
			"KillSignal":      dbus.MakeVariant(int32(s.cfg.KillSignal)),
			"KillMode":        dbus.MakeVariant(s.cfg.KillMode),
			"SendSIGKILL":     dbus.MakeVariant(!s.cfg.NoSIGKILL),
		}, nil
	}
	return map[string]dbus.Variant{}, nil
}

// escape spells a unit name as systemd does in object paths: letters,
// and digits after the first byte, stay; every other byte is _ and two
// hexadecimal digits ("termsig_2dtest_2eservice").
func escape(name string) string {
	var b strings.Builder
	for i := range len(name) {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "_%02x", c)
	}
	return b.String()
}

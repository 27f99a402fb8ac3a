package logindtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// DefaultProgram is where Debian's systemd package installs logind.
const DefaultProgram = "/lib/systemd/systemd-logind"

// SkipRealEnv names the environment variable that, set to 1, makes
// [StartReal] skip the test rather than fail it where the real logind
// cannot run (not Linux, not root, the program missing). It is for a
// developer's machine; CI installs what the real logind needs instead
// (.ci/deps), so that its tests never pass untested.
const SkipRealEnv = "TERMSIG_SKIP_REAL_LOGIND"

// RealConfig configures a [RealLogind].
type RealConfig struct {
	// Program is the systemd-logind binary; empty means DefaultProgram.
	Program string

	// InhibitDelayMax is InhibitDelayMaxSec in its logind.conf, to the
	// millisecond; 0 leaves logind's default (5 s).
	InhibitDelayMax time.Duration
}

// A RealLogind is the systemd-logind program itself on a [Bus] of the
// test's: it runs in a mount namespace of its own, where a directory of
// the test's is /run (its logind.conf drop-in, its state, /run/nologin,
// utmp), so that it touches nothing of the machine's; with a [Systemd]
// stub on the same bus it carries out shutdowns as far as StartUnit. It
// needs Linux, root (for the namespace), sh and mount, and the program
// (Debian's package systemd).
type RealLogind struct {
	conn    *dbus.Conn // the test's own connection, for calls to logind
	run     string     // the directory logind sees as /run
	address string     // of the bus
	prog    string     // the program; set on Linux only

	mu     sync.Mutex
	cmd    procHandle
	output strings.Builder // logind's log (stderr, debug level)
}

// procHandle is the running program; Close kills it and waits.
type procHandle interface{ kill() error }

// Run returns the directory that logind sees as /run: its inhibitors are
// in systemd/inhibit, a scheduled shutdown in systemd/shutdown/scheduled.
func (l *RealLogind) Run() string { return l.run }

// Output returns what logind has logged so far (at debug level).
func (l *RealLogind) Output() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.output.String()
}

func (l *RealLogind) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.output.Write(p)
}

// UniqueName returns logind's unique name on the bus.
func (l *RealLogind) UniqueName() (string, error) {
	var owner string
	err := l.conn.BusObject().Call("org.freedesktop.DBus.GetNameOwner", 0, BusName).Store(&owner)
	return owner, err
}

func (l *RealLogind) manager() dbus.BusObject { return l.conn.Object(BusName, Path) }

// PowerOff asks logind to power the machine off, as `systemctl poweroff`
// does: PowerOff(false). logind announces the shutdown, waits for the
// delay locks, then asks the [Systemd] stub to start poweroff.target.
func (l *RealLogind) PowerOff() error {
	return l.manager().Call(Interface+".PowerOff", 0, false).Err
}

// Reboot asks logind to reboot, as `systemctl reboot` does.
func (l *RealLogind) Reboot() error {
	return l.manager().Call(Interface+".Reboot", 0, false).Err
}

// ScheduleShutdown schedules a shutdown of type typ ("poweroff",
// "reboot", "halt", or one of them after "dry-") at the time at, as
// `shutdown -h +N` and `systemctl poweroff --when=` do.
func (l *RealLogind) ScheduleShutdown(typ string, at time.Time) error {
	return l.manager().Call(Interface+".ScheduleShutdown", 0, typ, uint64(at.UnixMicro())).Err
}

// CancelScheduledShutdown cancels the scheduled shutdown, as `shutdown
// -c` does, and reports whether one was scheduled.
func (l *RealLogind) CancelScheduledShutdown() (bool, error) {
	var cancelled bool
	err := l.manager().Call(Interface+".CancelScheduledShutdown", 0).Store(&cancelled)
	return cancelled, err
}

// ScheduledShutdown reads the ScheduledShutdown property: the type and
// the time, in µs since the epoch.
func (l *RealLogind) ScheduledShutdown() (string, uint64, error) {
	v, err := l.manager().GetProperty(Interface + ".ScheduledShutdown")
	if err != nil {
		return "", 0, err
	}
	var s struct {
		Type string
		USec uint64
	}
	err = dbus.Store([]any{v.Value()}, &s)
	return s.Type, s.USec, err
}

// WaitInhibitors waits until cond, called with logind's ListInhibitors
// whenever logind says that its inhibitors changed (PropertiesChanged of
// DelayInhibited, BlockInhibited), returns true, or ctx is done.
func (l *RealLogind) WaitInhibitors(ctx context.Context, cond func([]Inhibitor) bool) error {
	sigs := make(chan *dbus.Signal, 16)
	l.conn.Signal(sigs)
	defer l.conn.RemoveSignal(sigs)
	match := []dbus.MatchOption{dbus.WithMatchSender(BusName), dbus.WithMatchObjectPath(Path),
		dbus.WithMatchInterface(propsInterface), dbus.WithMatchMember("PropertiesChanged")}
	if err := l.conn.AddMatchSignalContext(ctx, match...); err != nil {
		return err
	}
	defer l.conn.RemoveMatchSignal(match...)
	for {
		inhs, err := ListInhibitors(l.address)
		if err != nil {
			return err
		}
		if cond(inhs) {
			return nil
		}
		select {
		case <-sigs:
		case <-ctx.Done():
			return fmt.Errorf("logindtest: waiting for inhibitors (now %d): %w", len(inhs), ctx.Err())
		}
	}
}

// Close stops logind, as a crash would (SIGKILL), waits for it to exit
// and removes its /run.
func (l *RealLogind) Close() error {
	l.mu.Lock()
	cmd := l.cmd
	l.cmd = nil
	l.mu.Unlock()
	var err error
	if cmd != nil {
		err = cmd.kill()
	}
	l.conn.Close()
	return errors.Join(err, os.RemoveAll(l.run))
}

// StartReal starts a Bus, the [Systemd] stub and the real logind on it,
// for a test: all are closed when tb ends, and logind's log is in the
// test's output if it failed. Where the real logind cannot run, tb fails
// saying why, unless [SkipRealEnv] is 1, when it is skipped.
func StartReal(tb testing.TB, c RealConfig) (*Bus, *RealLogind, *Systemd) {
	tb.Helper()
	if err := RealMissing(c); err != nil {
		if os.Getenv(SkipRealEnv) == "1" {
			tb.Skip(err)
		}
		tb.Fatalf("%v (set %s=1 to skip the tests of the real logind)", err, SkipRealEnv)
	}
	bus, err := StartBus()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { bus.Close() })
	sd, err := NewSystemd(bus.Address())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sd.Close() })
	l, err := NewReal(bus.Address(), c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("systemd-logind's log:\n%s", l.Output())
		}
		l.Close()
	})
	return bus, l, sd
}

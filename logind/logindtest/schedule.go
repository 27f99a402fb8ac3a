package logindtest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
)

// scheduled is the fake's ScheduledShutdown.
type scheduled struct {
	typ  string // "" when none
	usec uint64 // µs since the epoch
	dry  bool   // the type began with "dry-": nothing happens when due
}

// variant is the property's value: (type, time), ("", UINT64_MAX) when
// none, as systemd 252 says (older versions said ("", 0)).
func (s scheduled) variant() dbus.Variant {
	usec := s.usec
	if s.typ == "" {
		usec = math.MaxUint64
	}
	return dbus.MakeVariant(struct {
		Type string
		USec uint64
	}{s.typ, usec})
}

// ScheduleShutdown schedules a shutdown of type typ at the time at, as
// logind's method of the name does for `shutdown -h +5` and `systemctl
// poweroff --when=`: ScheduledShutdown says (typ, at), and when at comes
// the fake announces the shutdown as [Logind.PrepareForShutdown] does,
// unless typ began with "dry-" (the property shows the type without it),
// when only the schedule ends. A schedule that fired stays in the
// property, as in systemd 252. The types are poweroff, reboot, halt,
// kexec and soft-reboot, each with or without "dry-"; a new schedule
// replaces the old one.
func (l *Logind) ScheduleShutdown(typ string, at time.Time) error {
	return l.schedule(typ, uint64(at.UnixMicro()))
}

func (l *Logind) schedule(typ string, usec uint64) error {
	kind, dry := strings.CutPrefix(typ, "dry-")
	switch kind {
	case "poweroff", "reboot", "halt", "kexec", "soft-reboot":
	default:
		return fmt.Errorf("logindtest: unsupported shutdown type %q", typ)
	}
	if usec > math.MaxInt64 {
		return fmt.Errorf("logindtest: time %d out of range", usec)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("logindtest: closed")
	}
	l.stopTimerLocked()
	s := scheduled{kind, usec, dry}
	l.sched = s
	l.wg.Add(1)
	l.timer = time.AfterFunc(time.Until(time.UnixMicro(int64(usec))), func() {
		defer l.wg.Done()
		l.fire(s)
	})
	return l.schedChangedLocked()
}

// fire carries out the schedule s, unless it was cancelled or replaced
// meanwhile.
func (l *Logind) fire(s scheduled) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.sched != s {
		return
	}
	l.timer = nil
	if s.dry {
		l.sched = scheduled{}
		_ = l.schedChangedLocked()
		return
	}
	_ = l.announceLocked(true, s.typ)
}

// CancelScheduledShutdown cancels the scheduled shutdown, as logind's
// method of the name does for `shutdown -c`, and reports whether one was
// scheduled. A shutdown that fired already goes on: only the schedule
// ends, as in systemd 252.
func (l *Logind) CancelScheduledShutdown() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sched.typ == "" {
		return false, nil
	}
	l.stopTimerLocked()
	l.sched = scheduled{}
	return true, l.schedChangedLocked()
}

// stopTimerLocked stops the timer of the schedule; l.mu is held.
func (l *Logind) stopTimerLocked() {
	if l.timer != nil && l.timer.Stop() {
		l.wg.Done()
	}
	l.timer = nil
}

// schedChangedLocked sends PropertiesChanged for ScheduledShutdown if
// Config.EmitScheduledChanges; l.mu is held.
func (l *Logind) schedChangedLocked() error {
	if !l.cfg.EmitScheduledChanges {
		return nil
	}
	return l.conn.Emit(Path, propsInterface+".PropertiesChanged", Interface,
		map[string]dbus.Variant{"ScheduledShutdown": l.sched.variant()}, []string{})
}

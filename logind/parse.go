package logind

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
)

// The bus daemon's own name and signal.
const (
	busDaemon        = "org.freedesktop.DBus"
	busPath          = "/org/freedesktop/DBus"
	nameOwnerChanged = "org.freedesktop.DBus.NameOwnerChanged"
)

// Events of the notices, in termsig.Notice.Event.
const (
	// EventShutdown is the event of a shutdown whose type logind did not
	// say: an older logind sends only PrepareForShutdown, and a shutdown
	// already under way when the source connected shows no type.
	EventShutdown = "shutdown"
	// EventPrefix begins the event of a shutdown of a known type:
	// "shutdown/poweroff", "shutdown/reboot", "shutdown/halt",
	// "shutdown/kexec", "shutdown/soft-reboot".
	EventPrefix = EventShutdown + "/"
	// EventScheduled is the event of a shutdown that logind has
	// scheduled (`shutdown -h +5`), followed by "/" and its type when
	// that is one this package trusts: "scheduled/poweroff",
	// "scheduled/reboot".
	EventScheduled = "scheduled"
)

// maxTypeLen bounds the shutdown type taken from a signal.
const maxTypeLen = 32

// A shutdownSignal is PrepareForShutdown or PrepareForShutdownWithMetadata.
type shutdownSignal struct {
	active bool   // true: the shutdown begins; false: it was cancelled
	typ    string // "poweroff", "reboot", …; "" when not said
}

// parseShutdown reads one of logind's shutdown signals. It checks only
// the signal's shape: whether its sender is logind is the caller's check.
func parseShutdown(sig *dbus.Signal) (shutdownSignal, error) {
	switch sig.Name {
	case signalOld:
		if len(sig.Body) != 1 {
			return shutdownSignal{}, fmt.Errorf("logind: %s with %d arguments", sig.Name, len(sig.Body))
		}
		active, ok := sig.Body[0].(bool)
		if !ok {
			return shutdownSignal{}, fmt.Errorf("logind: %s with a %T, not a boolean", sig.Name, sig.Body[0])
		}
		return shutdownSignal{active: active}, nil
	case signalNew:
		if len(sig.Body) != 2 {
			return shutdownSignal{}, fmt.Errorf("logind: %s with %d arguments", sig.Name, len(sig.Body))
		}
		active, ok := sig.Body[0].(bool)
		md, ok2 := sig.Body[1].(map[string]dbus.Variant)
		if !ok || !ok2 {
			return shutdownSignal{}, fmt.Errorf("logind: %s(%T, %T), not (b, a{sv})", sig.Name, sig.Body[0], sig.Body[1])
		}
		typ, _ := md["type"].Value().(string)
		return shutdownSignal{active: active, typ: cleanType(typ)}, nil
	}
	return shutdownSignal{}, errors.New("logind: not a shutdown signal: " + sig.Name)
}

// cleanType returns typ if it looks like a shutdown type (lower-case
// letters, digits and dashes, short), and "" otherwise: an unknown type is
// still a shutdown, but its name is not trusted into the Event.
func cleanType(typ string) string {
	if len(typ) == 0 || len(typ) > maxTypeLen {
		return ""
	}
	for _, c := range typ {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return ""
		}
	}
	return typ
}

// kindOf maps a shutdown type to the Kind of its notice: the machine comes
// back after a reboot, kexec or soft-reboot, and does not after anything
// else, including a type this package does not know.
func kindOf(typ string) termsig.Kind {
	switch typ {
	case "reboot", "kexec", "soft-reboot":
		return termsig.Reboot
	}
	return termsig.Terminate
}

// eventOf names the shutdown of type typ.
func eventOf(typ string) string {
	if typ == "" {
		return EventShutdown
	}
	return EventPrefix + typ
}

// noticeOf is the notice of a shutdown of type typ seen at now, which
// logind holds for the delay locks at most delay; delay < 0 means no
// bound is known.
func noticeOf(typ string, now time.Time, delay time.Duration, reason string) termsig.Notice {
	n := termsig.Notice{
		Kind:     kindOf(typ),
		Event:    eventOf(typ),
		Reason:   reason,
		Observed: now,
	}
	if delay >= 0 {
		n.Deadline = now.Add(delay)
	}
	return n
}

// delayOf converts InhibitDelayMaxUSec to a Duration; -1 for "infinity"
// or a value too large to be a Duration (no deadline is known then).
func delayOf(usec uint64) time.Duration {
	const maxUsec = uint64(1<<63-1) / uint64(time.Microsecond)
	if usec > maxUsec {
		return -1
	}
	return time.Duration(usec) * time.Microsecond
}

// A schedule is logind's ScheduledShutdown: a shutdown of type typ due at
// usec µs after the epoch. The zero schedule is none.
type schedule struct {
	typ  string // "" when none; "?" when logind named a type not trusted
	usec uint64
}

// notShutdowns are logind's actions (HandleAction's names) that shut
// nothing down: newer logind shows its delayed action in
// ScheduledShutdown while delay locks hold it, sleeps included.
var notShutdowns = map[string]bool{
	"ignore": true, "lock": true, "suspend": true, "hibernate": true, "hybrid-sleep": true,
	"suspend-then-hibernate": true, "sleep": true, "secure-attention-key": true,
}

// unknownType stands for a scheduled shutdown whose type is not trusted
// into the Event.
const unknownType = "?"

// parseSchedule reads ScheduledShutdown, a (st): logind says "" for the
// type when nothing is scheduled (and 0, or UINT64_MAX since systemd
// 252, for the time). A time of 0 is no schedule either: systemd 252
// shows a shutdown that was not scheduled (`systemctl poweroff`) as
// ("poweroff", 0), from when it begins until the next schedule, even
// after the shutdown was cancelled.
func parseSchedule(v any) (schedule, error) {
	st, ok := v.([]any)
	if !ok || len(st) != 2 {
		return schedule{}, fmt.Errorf("logind: ScheduledShutdown is a %T, not (st)", v)
	}
	typ, ok := st[0].(string)
	usec, ok2 := st[1].(uint64)
	if !ok || !ok2 {
		return schedule{}, fmt.Errorf("logind: ScheduledShutdown is (%T, %T), not (st)", st[0], st[1])
	}
	if typ == "" || usec == 0 {
		return schedule{}, nil
	}
	if notShutdowns[strings.TrimPrefix(typ, "dry-")] {
		return schedule{}, nil // a suspend held by delay locks, say
	}
	if typ = cleanType(typ); typ == "" {
		typ = unknownType
	}
	return schedule{typ: typ, usec: usec}, nil
}

// event names the scheduled shutdown s.
func (s schedule) event() string {
	if s.typ == unknownType {
		return EventScheduled
	}
	return EventScheduled + "/" + s.typ
}

// notice is the advice that s is scheduled, seen at now: Maintenance with
// the time logind will shut down as Deadline (zero for a time past what
// a time.Time holds).
func (s schedule) notice(now time.Time) termsig.Notice {
	what := "a shutdown"
	if s.typ != unknownType {
		what = "a " + s.typ
	}
	n := termsig.Notice{
		Kind:     termsig.Maintenance,
		Event:    s.event(),
		Reason:   "systemd-logind has " + what + " scheduled",
		Observed: now,
	}
	if s.usec <= math.MaxInt64 {
		n.Deadline = time.UnixMicro(int64(s.usec))
	}
	return n
}

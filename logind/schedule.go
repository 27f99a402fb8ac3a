package logind

import (
	"context"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
)

// A scheduled shutdown (`shutdown -h +5`, `systemctl poweroff --when=`)
// is logind's ScheduledShutdown property, set minutes before logind
// announces the shutdown. systemd 252 changes it without a signal
// (EmitsChangedSignal is false), so the watcher reads it when a session
// starts and every ScheduledInterval; a logind that sends
// PropertiesChanged for it makes the watcher read it at once. Reads run
// beside the signals, one at a time, and an answer is acted on after the
// signals that came before it.

// readSchedule reads ScheduledShutdown and acts on what it says; a read
// that fails, or an answer of the wrong shape, changes nothing.
func (w *watcher) readSchedule(ctx context.Context) {
	v, err := w.property(ctx, scheduledShutdown)
	if err != nil {
		return
	}
	if s, err := parseSchedule(v); err == nil {
		w.scheduled(s)
	}
}

// startPoll reads ScheduledShutdown without waiting for the answer,
// which comes on w.polled.
func (w *watcher) startPoll(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	w.pollCancel = cancel
	w.poll = w.conn.Object(busName, objPath).GoWithContext(pctx, propsIface+".Get", 0, w.polled, iface, scheduledShutdown)
}

// endPoll acts on the answer of the read that startPoll began.
func (w *watcher) endPoll(ctx context.Context, call *dbus.Call) {
	w.stopPoll()
	// The signals that came before the answer are older than it.
	w.drain(ctx)
	if call.Err != nil || w.renew {
		return // the next read tells; a new logind is read when met
	}
	var v dbus.Variant
	if call.Store(&v) != nil {
		return
	}
	if s, err := parseSchedule(v.Value()); err == nil {
		w.scheduled(s)
	}
}

// stopPoll abandons the read under way, if any.
func (w *watcher) stopPoll() {
	if w.pollCancel != nil {
		w.pollCancel()
	}
	w.poll, w.pollCancel = nil, nil
}

// scheduled reconciles the advice sent with what logind has scheduled:
// a Maintenance notice for a new schedule (or a new time), a Cleared when
// the schedule is gone or replaced by one of another type. While a
// shutdown is under way its schedule (logind keeps it after it fired) is
// no news: the imminent notice was sent.
func (w *watcher) scheduled(s schedule) {
	old := w.sched
	switch {
	case s == old:
		return
	case s.typ == "":
		w.sched = schedule{}
		w.send.push(termsig.Notice{
			Kind: termsig.Cleared, Event: old.event(),
			Reason: "systemd-logind no longer has the shutdown scheduled", Observed: time.Now(),
		})
		return
	case w.src.underway():
		return
	}
	if old.typ != "" && old.event() != s.event() {
		w.send.push(termsig.Notice{
			Kind: termsig.Cleared, Event: old.event(),
			Reason: "systemd-logind scheduled another shutdown instead", Observed: time.Now(),
		})
	}
	w.sched = s
	w.send.push(s.notice(time.Now()))
}

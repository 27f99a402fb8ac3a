package logind

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/godbus/dbus/v5"
)

// maxQueued bounds the signals that wait for the watcher. Only logind's
// own signals (its shutdown signals, its PropertiesChanged for
// ScheduledShutdown) and the bus's NameOwnerChanged for logind pass the
// filter once logind's unique name is known, a handful per shutdown; the
// bound matters only for a flood in the moment before it is known.
const maxQueued = 1024

// A filter is the connection's signal handler. godbus calls DeliverSignal
// on its reader goroutine, which must not block (method replies come that
// way too) and must not spawn a goroutine per signal, as godbus's default
// handler does when its channel is full: the filter drops what cannot be
// logind's at once and queues the rest, bounded, for the watcher.
//
// It follows logind's owner itself, from the bus's NameOwnerChanged as it
// reads them, so that each signal is judged by who owned the name when it
// came: one that a new logind sends right after it took the name is
// believed, one that the old logind sent before it left is too.
type filter struct {
	owner      atomic.Pointer[string] // logind's unique name; nil until known
	forged     atomic.Int64           // shutdown signals not sent by logind
	lastForger atomic.Pointer[string] // the sender of the last of them
	wake       chan struct{}          // capacity 1: "the queue or forged changed"

	mu      sync.Mutex
	queue   []queued
	dropped int // signals dropped because the queue was full
}

// A queued signal, with whether its sender owned logind's name when it
// came: 1 yes, 0 not known yet (the watcher decides), -1 never queued.
type queued struct {
	sig     *dbus.Signal
	verdict int8
}

func newFilter() *filter { return &filter{wake: make(chan struct{}, 1)} }

// DeliverSignal queues sig if it may matter to the watcher.
func (f *filter) DeliverSignal(_, _ string, sig *dbus.Signal) {
	var verdict int8
	switch sig.Name {
	case signalOld, signalNew, propertiesChanged:
		if sig.Path != objPath || sig.Name == propertiesChanged && !schedChanged(sig) {
			return
		}
		if o := f.owner.Load(); o != nil {
			if sig.Sender != *o {
				f.forgery(sig.Sender)
				return
			}
			verdict = 1
		}
	case nameOwnerChanged:
		owner, ok := newOwner(sig)
		if !ok {
			return
		}
		f.owner.Store(&owner)
		verdict = 1
	default:
		return
	}
	f.mu.Lock()
	// NameOwnerChanged for logind is never dropped: it tells who to
	// believe.
	if len(f.queue) < maxQueued || sig.Name == nameOwnerChanged {
		f.queue = append(f.queue, queued{sig, verdict})
	} else {
		f.dropped++
	}
	f.mu.Unlock()
	f.poke()
}

// schedChanged reports whether sig, a PropertiesChanged, says that
// logind's ScheduledShutdown changed (with its value, or without).
// logind sends PropertiesChanged for other properties of the Manager too,
// which the watcher need not hear of.
func schedChanged(sig *dbus.Signal) bool {
	if len(sig.Body) != 3 {
		return false
	}
	in, _ := sig.Body[0].(string)
	changed, _ := sig.Body[1].(map[string]dbus.Variant)
	invalidated, _ := sig.Body[2].([]string)
	_, ok := changed[scheduledShutdown]
	return in == iface && (ok || slices.Contains(invalidated, scheduledShutdown))
}

// newOwner returns the new owner of logind's name that sig, the bus's
// NameOwnerChanged, announces ("" when logind left).
func newOwner(sig *dbus.Signal) (string, bool) {
	if sig.Sender != busDaemon || len(sig.Body) != 3 {
		return "", false
	}
	name, _ := sig.Body[0].(string)
	owner, ok := sig.Body[2].(string)
	return owner, ok && name == busName
}

// forgery counts a shutdown signal that logind did not send, for the
// watcher to log.
func (f *filter) forgery(sender string) {
	f.lastForger.Store(&sender)
	f.forged.Add(1)
	f.poke()
}

func (f *filter) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// droppedCount returns how many signals the full queue dropped.
func (f *filter) droppedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// take returns the queued signals and empties the queue.
func (f *filter) take() []queued {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queue
	f.queue = nil
	return q
}

// requeue puts qs back at the front of the queue.
func (f *filter) requeue(qs []queued) {
	if len(qs) == 0 {
		return
	}
	f.mu.Lock()
	f.queue = append(append([]queued(nil), qs...), f.queue...)
	f.mu.Unlock()
	f.poke()
}

// learn records logind's unique name as GetNameOwner gave it, unless a
// NameOwnerChanged read meanwhile already said who owns it (that is as
// new, or newer).
func (f *filter) learn(name string) { f.owner.CompareAndSwap(nil, &name) }

// gone reports whether logind has left the bus (and no new one came).
func (f *filter) gone() bool {
	o := f.owner.Load()
	return o != nil && *o == ""
}

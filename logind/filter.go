package logind

import (
	"sync"
	"sync/atomic"

	"github.com/godbus/dbus/v5"
)

// maxQueued bounds the signals that wait for the watcher. Only logind's
// own signals and the bus's NameOwnerChanged for logind pass the filter
// once logind's unique name is known, which is a handful per shutdown; the
// bound matters only for a flood in the moment before it is known.
const maxQueued = 1024

// A filter is the connection's signal handler. godbus calls DeliverSignal
// on its reader goroutine, which must not block (method replies come that
// way too) and must not spawn a goroutine per signal, as godbus's default
// handler does when its channel is full: the filter drops what cannot be
// logind's at once and queues the rest, bounded, for the watcher.
type filter struct {
	owner      atomic.Pointer[string] // logind's unique name; nil until known
	forged     atomic.Int64           // shutdown signals not sent by logind
	lastForger atomic.Pointer[string] // the sender of the last of them
	wake       chan struct{}          // capacity 1: "the queue or forged changed"

	mu      sync.Mutex
	queue   []*dbus.Signal
	dropped int // signals dropped because the queue was full
}

func newFilter() *filter { return &filter{wake: make(chan struct{}, 1)} }

// DeliverSignal queues sig if it may matter to the watcher.
func (f *filter) DeliverSignal(_, _ string, sig *dbus.Signal) {
	switch sig.Name {
	case signalOld, signalNew:
		if sig.Path != objPath {
			return
		}
		if o := f.owner.Load(); o != nil && sig.Sender != *o {
			f.forgery(sig.Sender)
			return
		}
	case nameOwnerChanged:
		if sig.Sender != busDaemon {
			return
		}
	default:
		return
	}
	f.mu.Lock()
	// NameOwnerChanged for logind is never dropped: it passed the bus's
	// own check of the sender, and tells who to believe.
	if len(f.queue) < maxQueued || sig.Name == nameOwnerChanged {
		f.queue = append(f.queue, sig)
	} else {
		f.dropped++
	}
	f.mu.Unlock()
	f.poke()
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
func (f *filter) take() []*dbus.Signal {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queue
	f.queue = nil
	return q
}

// requeue puts sigs back at the front of the queue.
func (f *filter) requeue(sigs []*dbus.Signal) {
	if len(sigs) == 0 {
		return
	}
	f.mu.Lock()
	f.queue = append(append([]*dbus.Signal(nil), sigs...), f.queue...)
	f.mu.Unlock()
	f.poke()
}

// setOwner records logind's unique name ("" when logind has left the bus).
func (f *filter) setOwner(name string) { f.owner.Store(&name) }

// gone reports whether logind has left the bus (and no new one came).
func (f *filter) gone() bool {
	o := f.owner.Load()
	return o != nil && *o == ""
}

// ownerIs reports whether sender is logind's known unique name.
func (f *filter) ownerIs(sender string) bool {
	o := f.owner.Load()
	return o != nil && *o != "" && sender == *o
}

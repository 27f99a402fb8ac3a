// Package termsigtest provides a fake [termsig.Source] for unit tests of
// programs that use termsig, and [TestSource], which checks any Source
// against the contract of [termsig.Source]. It imports only package
// termsig, so a test that uses it does not pull in the cloud SDKs or
// netlink.
//
// A test sends the notices it wants with [Fake.Send], whose channel is
// closed once the notice is on Notifier.C; it makes the source fail with
// [Fake.Fail], and waits for it to run with [Fake.Started]: no sleeping.
//
//	spot := termsigtest.NewFake("imds")
//	n := termsig.New(spot)
//	defer n.Stop()
//	spot.Send(termsig.Notice{Kind: termsig.Terminate, Deadline: time.Now().Add(2 * time.Minute)})
//	// the code under test reads n.C()
//
// Each source package has a fake of its own that speaks the real protocol
// over a real socket; the HTTP ones take the same [Fault]s:
//
//   - imds/imdstest: the EC2 instance metadata service (IMDSv2);
//   - gcemeta/gcemetatest: the GCE metadata server, long polls included;
//   - azure/azuretest: Azure's Scheduled Events and acknowledgements;
//   - acpi/acpitest: acpid, input devices, netlink and input_event bytes;
//   - logind/logindtest: a private dbus-daemon with a fake systemd-logind.
package termsigtest

import (
	"context"
	"sync"

	"github.com/termsig/termsig"
)

// A Fake is a [termsig.Source] whose notices, health and readiness a test
// decides. Its methods are safe for use from any goroutine, before or after
// Watch starts. Watch it with one Notifier at a time; it may be watched
// again after that Watch has returned, and keeps what was not delivered.
//
// A Fake's first look is not local (its [termsig.Traits] are the zero
// ones): it calls [termsig.Run.Ready] as soon as Watch starts and has
// delivered the notices sent before (as a real source's first look finds
// what is already posted), unless [Fake.HoldReady] was called. It is a
// [termsig.Releaser] that records what it is given: [Fake.Released] shows
// whether the code under test released its notice.
type Fake struct {
	name    string
	wake    chan struct{} // capacity 1: "the queue or the end changed"
	started chan struct{}
	once    sync.Once

	mu     sync.Mutex
	queue  []op // pending from queue[head]
	head   int
	end    *op // what Watch does once the queue is empty: return or panic
	hold   bool
	active bool // a Watch is running

	released []termsig.Notice
}

// op is one thing for Watch to do, in order.
type op struct {
	kind      opKind
	notice    termsig.Notice
	delivered chan struct{} // of opSend: closed once the notice is on C
	err       error
	panic     any
}

type opKind uint8

const (
	opSend opKind = iota
	opReport
	opReady
	opReturn
	opPanic
)

// NewFake returns a Fake named name.
func NewFake(name string) *Fake {
	return &Fake{
		name:    name,
		wake:    make(chan struct{}, 1),
		started: make(chan struct{}),
	}
}

// Name returns the name given to NewFake.
func (f *Fake) Name() string { return f.name }

// Send queues n for delivery by Watch and returns at once; a Fake that is
// not being watched keeps it until Watch starts. Notices are delivered in
// the order they were sent; the Notifier stamps them as it does every
// notice (Source is the Fake's name, a zero Observed the time of delivery).
//
// The channel Send returns is closed once n is on the Notifier's C: its
// [termsig.Run.Send] returned nil, after those of the notices sent before
// n. On C does not mean received: C is buffered ([termsig.Config.Buffer]),
// so the consumer may not have taken n yet. With a Buffer of 1, once the
// channel of a later notice of this Fake is closed, the consumer has
// received n. The channel stays open while n is not delivered: a Watch
// that ends first leaves n queued, and the next Watch delivers it and
// closes the channel. Wait on it in a select with a timeout, as on any
// event.
func (f *Fake) Send(n termsig.Notice) (delivered <-chan struct{}) {
	c := make(chan struct{})
	f.push(op{kind: opSend, notice: n, delivered: c})
	return c
}

// Report makes Watch report err as its health with [termsig.Run.Report],
// after the notices sent before: a transient failure the source retries,
// or nil for healthy again. It shows in Notifier.Status.
func (f *Fake) Report(err error) { f.push(op{kind: opReport, err: err}) }

// HoldReady makes the next Watch hold back its Run.Ready call until
// [Fake.SetReady], so that a test can see what a program does while a
// source has not had its first look. Call it before Watch starts.
func (f *Fake) HoldReady() {
	f.mu.Lock()
	f.hold = true
	f.mu.Unlock()
}

// SetReady makes Watch call Run.Ready, after the notices sent before.
func (f *Fake) SetReady() { f.push(op{kind: opReady}) }

// Fail makes Watch return err once it has delivered what was sent before,
// whether Watch has started or not. Wrap
// termsig.ErrUnavailable in err to act as a source that does not apply to
// the host. Fail(nil) makes Watch return nil, like a source that ended
// early. Only the first call of Fail or Panic has an effect.
func (f *Fake) Fail(err error) { f.finish(op{kind: opReturn, err: err}) }

// Panic makes Watch panic with v once it has delivered what was sent
// before, as a broken source would. Only the first call of Fail or Panic
// has an effect.
func (f *Fake) Panic(v any) { f.finish(op{kind: opPanic, panic: v}) }

// Started returns a channel that is closed once Watch has been called, so
// that a test can wait for the source to run without sleeping.
func (f *Fake) Started() <-chan struct{} { return f.started }

func (f *Fake) push(o op) {
	f.mu.Lock()
	f.queue = append(f.queue, o)
	f.mu.Unlock()
	f.poke()
}

func (f *Fake) finish(o op) {
	f.mu.Lock()
	if f.end == nil {
		f.end = &o
	}
	f.mu.Unlock()
	f.poke()
}

func (f *Fake) poke() {
	select {
	case f.wake <- struct{}{}:
	default: // a wake-up is already pending; Watch will see the change
	}
}

// Watch carries out what the test asked, in order, until ctx is done or
// Fail or Panic is called. Notices it could not deliver before ctx ended
// stay queued for the next Watch.
func (f *Fake) Watch(ctx context.Context, r *termsig.Run) error {
	hold := f.begin()
	defer f.unwatch()
	if !hold {
		f.SetReady() // after what was sent before Watch started
	}
	for {
		o, ok := f.next()
		if !ok {
			select {
			case <-f.wake:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		switch o.kind {
		case opSend:
			if err := r.Send(ctx, o.notice); err != nil {
				return err // o stays queued
			}
			close(o.delivered)
		case opReport:
			r.Report(o.err)
		case opReady:
			r.Ready()
			f.mu.Lock()
			f.hold = false
			f.mu.Unlock()
		case opReturn:
			return o.err
		case opPanic:
			panic(o.panic)
		}
		f.done()
	}
}

// begin marks the Fake as watched and returns whether Ready is held.
func (f *Fake) begin() (hold bool) {
	f.mu.Lock()
	if f.active {
		f.mu.Unlock()
		panic("termsig: termsigtest.Fake " + f.name + " watched twice at once")
	}
	f.active = true
	hold = f.hold
	f.mu.Unlock()
	f.once.Do(func() { close(f.started) })
	return hold
}

func (f *Fake) unwatch() {
	f.mu.Lock()
	f.active = false
	f.mu.Unlock()
}

// next returns what Watch does next: the first queued op, or, once the
// queue is empty, the end that Fail or Panic set. It returns false when
// there is nothing to do yet.
func (f *Fake) next() (op, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.head < len(f.queue):
		return f.queue[f.head], true
	case f.end != nil:
		return *f.end, true
	}
	return op{}, false
}

// done removes the op that next returned from the queue.
func (f *Fake) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue[f.head] = op{}
	f.head++
	if f.head == len(f.queue) {
		f.queue, f.head = f.queue[:0], 0 // reuse the array from its start
	}
}

var _ termsig.Releaser = (*Fake)(nil)

// Release records n and returns nil; see [termsig.Releaser].
func (f *Fake) Release(_ context.Context, n termsig.Notice) error {
	f.mu.Lock()
	f.released = append(f.released, n)
	f.mu.Unlock()
	return nil
}

// Released returns the notices given to Release so far, in order.
func (f *Fake) Released() []termsig.Notice {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]termsig.Notice(nil), f.released...)
}

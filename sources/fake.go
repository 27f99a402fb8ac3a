package sources

import (
	"context"
	"sync"
	"time"

	"github.com/termsig/termsig"
)

// A Fake is a Source for unit tests: the test decides what it sends and
// when it fails. Its methods are safe for use from any goroutine, before or
// after Watch starts. Watch it with one Notifier at a time.
type Fake struct {
	name    string
	wake    chan struct{} // capacity 1: "the queue or fail changed"
	started chan struct{}
	once    sync.Once

	mu      sync.Mutex
	queue   []termsig.Notice // pending from queue[head]
	head    int
	failed  bool
	failErr error
}

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
// not being watched yet keeps it until Watch starts. Send fills n.Source
// with the Fake's name and n.Observed with the current time when they are
// empty. Notices are delivered in the order they were sent.
func (f *Fake) Send(n termsig.Notice) {
	if n.Source == "" {
		n.Source = f.name
	}
	if n.Observed.IsZero() {
		n.Observed = time.Now()
	}
	f.mu.Lock()
	f.queue = append(f.queue, n)
	f.mu.Unlock()
	f.poke()
}

// Fail makes Watch return err once it has delivered the notices sent
// before; if Watch has not started, it returns err as soon as it does. Wrap
// termsig.ErrUnavailable in err to act as a source that does not apply to
// the host. Fail(nil) makes Watch return nil, like a source that ended
// early. Only the first call has an effect.
func (f *Fake) Fail(err error) {
	f.mu.Lock()
	if !f.failed {
		f.failed, f.failErr = true, err
	}
	f.mu.Unlock()
	f.poke()
}

// Started returns a channel that is closed once Watch has been called, so
// that a test can wait for the source to run without sleeping.
func (f *Fake) Started() <-chan struct{} { return f.started }

func (f *Fake) poke() {
	select {
	case f.wake <- struct{}{}:
	default: // a wake-up is already pending; Watch will see the change
	}
}

// Watch delivers the notices given to Send until ctx is done or Fail is
// called. Notices it could not deliver before ctx ended stay queued for the
// next Watch.
func (f *Fake) Watch(ctx context.Context, out chan<- termsig.Notice) error {
	f.once.Do(func() { close(f.started) })
	for {
		f.mu.Lock()
		if f.head < len(f.queue) {
			n := f.queue[f.head]
			f.mu.Unlock()
			select {
			case out <- n:
			case <-ctx.Done():
				return ctx.Err()
			}
			f.mu.Lock()
			f.queue[f.head] = termsig.Notice{}
			f.head++
			if f.head == len(f.queue) {
				f.queue, f.head = f.queue[:0], 0 // reuse the array from its start
			}
			f.mu.Unlock()
			continue
		}
		failed, err := f.failed, f.failErr
		f.mu.Unlock()
		if failed {
			return err
		}
		select {
		case <-f.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

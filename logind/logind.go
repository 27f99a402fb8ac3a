package logind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
)

// Name is the name of the source, in notices and in termsig.Notifier.Status.
const Name = "logind"

var (
	_ termsig.Detector  = (*Source)(nil)
	_ termsig.Describer = (*Source)(nil)
	_ termsig.Releaser  = (*Source)(nil)
)

// The names logind is reached by on the system bus.
const (
	busName   = "org.freedesktop.login1"
	objPath   = "/org/freedesktop/login1"
	iface     = "org.freedesktop.login1.Manager"
	signalOld = iface + ".PrepareForShutdown"
	signalNew = iface + ".PrepareForShutdownWithMetadata"

	propsIface        = "org.freedesktop.DBus.Properties"
	propertiesChanged = propsIface + ".PropertiesChanged"
	scheduledShutdown = "ScheduledShutdown"
)

// A Source hears shutdowns from systemd-logind and holds them with a delay
// lock until the consumer releases it. Create it with [New]; see the
// package documentation.
type Source struct {
	cfg Config

	mu       sync.Mutex
	lock     *os.File        // the delay lock; nil when none is held
	current  *termsig.Notice // the shutdown under way; nil when none
	watching bool
}

// New returns a logind source configured by c.
func New(c Config) *Source { return &Source{cfg: c} }

// Name returns "logind".
func (s *Source) Name() string { return Name }

// Traits says that the first look (connect to the bus, subscribe, take
// the lock) is local, so termsig.New waits for it, and a shutdown that
// begins right after New has returned is both heard and held.
func (s *Source) Traits() termsig.Traits { return termsig.Traits{LocalFirstLook: true} }

// Available reports whether the source can work here without a D-Bus call:
// an error wrapping termsig.ErrUnavailable when this is not Linux or the
// system bus's socket does not exist, another error when the Config cannot
// work, nil otherwise (logind itself may still be missing: Watch finds
// out).
func (s *Source) Available() error {
	if err := supported(); err != nil {
		return err
	}
	c := s.cfg.withDefaults()
	if err := c.check(); err != nil {
		return err
	}
	return c.present()
}

// Watch hears shutdowns until ctx is done; see the package documentation.
// It follows the contract of termsig.Source, and releases the lock it
// holds before it returns.
func (s *Source) Watch(ctx context.Context, r *termsig.Run) error {
	if err := s.Available(); err != nil {
		return err
	}
	c := s.cfg.withDefaults()
	s.mu.Lock()
	if s.watching {
		s.mu.Unlock()
		return errors.New("logind: Source watched by two Notifiers at once")
	}
	s.watching = true
	s.mu.Unlock()
	defer s.stop()

	eps, _ := parseAddress(c.Address) // checked by Available
	bo := backoff.Backoff{Base: c.backoff, Max: c.maxBackoff, Jitter: true}
	w := &watcher{src: s, cfg: c, eps: eps, run: r, send: newSender(r)}
	sendCtx, stopSending := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.send.loop(sendCtx) })
	defer wg.Wait()
	defer stopSending()
	for {
		err := w.session(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, termsig.ErrUnavailable):
			// Only a first failure says unavailable (no bus, no
			// logind); once either was there, its absence is
			// transient.
			return err
		}
		r.Report(err)
		r.Ready() // the first look failed; it is as ready as it gets
		if w.healthy {
			bo.Reset() // a session that worked starts the backoff afresh
		}
		// The sender hands over what waits meanwhile.
		if !backoff.Sleep(ctx, bo.Next()) {
			return nil
		}
	}
}

// stop releases the lock and forgets the shutdown: Watch has ended.
func (s *Source) stop() {
	s.mu.Lock()
	lock := s.lock
	s.lock, s.current, s.watching = nil, nil, false
	s.mu.Unlock()
	if lock != nil {
		lock.Close()
	}
}

// Release closes the delay lock held for the shutdown that n announced,
// so that it proceeds at once; see termsig.Releaser. A notice of a
// shutdown that is over (cancelled, or released already) releases
// nothing and returns nil, as does one of a Source that is not watching.
// n must be a notice of this source. Watch's return (Stop) and the
// process's exit release the lock too; its descriptor is close-on-exec, so
// the program's children never hold it.
func (s *Source) Release(_ context.Context, n termsig.Notice) error {
	if n.Source != Name {
		return fmt.Errorf("logind: release of a notice of source %q", n.Source)
	}
	s.mu.Lock()
	cur := s.current
	var lock *os.File
	if cur != nil && n.Kind != termsig.Cleared && n.Event == cur.Event && n.Observed.Equal(cur.Observed) {
		lock, s.lock = s.lock, nil
	}
	s.mu.Unlock()
	if lock != nil {
		return lock.Close()
	}
	return nil
}

// setLock makes f the held lock, closing the one it replaces; f is closed
// at once if Watch has ended meanwhile.
func (s *Source) setLock(f *os.File) {
	s.mu.Lock()
	old := s.lock
	if s.watching {
		s.lock = f
	} else {
		old = f
	}
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

// holding reports whether a lock is held.
func (s *Source) holding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lock != nil
}

// begin records the shutdown n announces, unless one is under way already
// (logind sends two signals for each); it reports whether n is news.
func (s *Source) begin(n termsig.Notice) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != nil {
		return false
	}
	s.current = &n
	return true
}

// end forgets the shutdown under way and returns its notice, or false if
// none was.
func (s *Source) end() (termsig.Notice, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return termsig.Notice{}, false
	}
	n := *s.current
	s.current = nil
	return n, true
}

// underway reports whether a shutdown is under way.
func (s *Source) underway() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current != nil
}

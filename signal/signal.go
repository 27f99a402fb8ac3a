package signal

import (
	"context"
	"os"
	ossignal "os/signal"
	"syscall"
	"time"

	"github.com/termsig/termsig"
)

// Name is the name of the source, in notices and in Notifier.Status.
const Name = "signal"

// A Source reports POSIX signals as notices. Create one with [New] or
// [NewMap], or with those methods of a [Config]. One Source may be watched
// by several Notifiers at once: each Watch registers its own channel with
// os/signal, and makes its own systemd lookup.
type Source struct {
	cfg   Config
	kinds map[os.Signal]termsig.Kind
	sigs  []os.Signal
}

// New returns a Source for sigs, configured by the zero [Config]. With no
// arguments it watches the signals that ask a process to leave: SIGTERM,
// SIGINT and SIGHUP (on Windows, os.Interrupt and SIGTERM).
//
// SIGTERM gives Terminate, SIGINT (os.Interrupt) gives Interrupt and SIGHUP
// gives Reload: "finish, then restart in place", which is not imminent. Any
// other signal gives Terminate; use [NewMap] to choose.
//
// On Windows the defaults are os.Interrupt (Ctrl-C, Ctrl-Break) and
// SIGTERM, which Go delivers for the console's close, logoff and shutdown
// events (CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT); there
// is no SIGHUP to send to a Windows process. Windows ends the process
// soon after those events whatever it does (about 5 s after a console
// close), so a drain there must be short.
func New(sigs ...os.Signal) *Source { return Config{}.New(sigs...) }

// NewMap returns a Source, configured by the zero [Config], that watches
// the signals in m and reports each with the kind m gives it, such as
// {syscall.SIGUSR1: termsig.Reload}. It copies m. It panics if m is empty,
// since watching no signal would mean watching every signal to os/signal.
func NewMap(m map[os.Signal]termsig.Kind) *Source { return Config{}.NewMap(m) }

// Traits says that signals concern this process, not the host (a Notifier
// left with only this source logs that no platform notice can reach the
// program any more), and that the first look is local: termsig.New
// returns only once Watch has installed its signal handler, so that a
// signal sent right after New is a notice rather than the signal's default
// action (for SIGTERM, death with status 143).
func (s *Source) Traits() termsig.Traits {
	return termsig.Traits{Local: true, LocalFirstLook: true}
}

// Name returns "signal".
func (s *Source) Name() string { return Name }

// Watch reports every signal it receives as its own notice (a second SIGINT
// is a second notice, so that a consumer can escalate) until ctx is done.
// It stops the delivery of the signals with os/signal.Stop before it
// returns, so that they regain their previous behaviour. The systemd
// lookup (see the package documentation) runs meanwhile and ends with it.
func (s *Source) Watch(ctx context.Context, r *termsig.Run) error {
	// Buffered, as os/signal requires: it never blocks to deliver, and a
	// burst of signals during a slow send is kept rather than dropped.
	ch := make(chan os.Signal, 16)
	ossignal.Notify(ch, s.sigs...)
	defer ossignal.Stop(ch)
	r.Ready()
	dl := startDeadlines(ctx, s.cfg.withDefaults(), r)
	defer dl.close()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case sig := <-ch:
			seen := time.Now()
			// Until the lookup has answered, a signal waits for it (at
			// most LookupTimeout): it may be the one with the deadline.
			nt := s.notice(sig)
			nt.Observed = seen
			nt.Deadline = dl.get(ctx).deadline(sig, seen)
			if err := r.Send(ctx, nt); err != nil {
				return err
			}
		}
	}
}

func (s *Source) notice(sig os.Signal) termsig.Notice {
	k, ok := s.kinds[sig]
	if !ok {
		k = kindOf(sig)
	}
	name := termsig.SignalName(sig)
	return termsig.Notice{Kind: k, Event: name, Reason: name, Signal: sig, Raw: name}
}

func kindOf(sig os.Signal) termsig.Kind {
	switch sig {
	case syscall.SIGTERM:
		return termsig.Terminate
	case os.Interrupt:
		return termsig.Interrupt
	case syscall.SIGHUP:
		return termsig.Reload
	}
	return termsig.Terminate
}

//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	ossignal "os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
)

// forwarded are the signals termsig passes on to the command as they are.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// catchable is forwarded less the signals that were ignored when termsig
// started (as under nohup): os/signal would otherwise un-ignore them for
// the command too.
func catchable() []os.Signal {
	var sigs []os.Signal
	for _, sig := range forwarded {
		if !ossignal.Ignored(sig) {
			sigs = append(sigs, sig)
		}
	}
	return sigs
}

// extendEvery is how often systemd is told again, while the command
// drains, that termsig needs until the kill time (EXTEND_TIMEOUT_USEC).
const extendEvery = 5 * time.Second

// supervise runs o.cmd in a process group of its own and returns its exit
// status (128+N if it died of signal N). Signals that termsig receives are
// forwarded; an imminent platform notice sends the command o.signal, and
// SIGKILL to its whole group at the deadline minus o.margin (at most
// o.maxDrain after the notice), or o.grace later when the notice has no
// deadline, and once the command has exited.
//
// A held termination (termsig.Notice.Held: the platform waits for a
// Release) sends o.finish instead, once, and waits for the command to
// exit until the hold's end: its latest deadline minus o.margin, at most
// o.maxHold after the first held notice. Then, or at once on a hard
// notice or a hold that lapsed, it goes on as for any imminent notice.
// Once the command has exited, the holds are released.
//
// srv counts the notices, the signals sent and the command's exit, and
// watches the loop; nil: nothing does.
func supervise(o *options, srcs []termsig.Source, log *slog.Logger, srv *ops.Server) int {
	// Before the command starts, so that a signal in between is forwarded,
	// not termsig's death.
	sigc := make(chan os.Signal, 32)
	ossignal.Notify(sigc, catchable()...)
	defer ossignal.Stop(sigc)

	cmd := exec.Command(o.cmd[0], o.cmd[1:]...)
	cmd.Env = childEnviron()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Error("termsig: cannot start the command", "cmd", o.cmd[0], "err", err)
		return startStatus(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	log.Info("termsig: command started", "cmd", o.cmd[0], "pid", cmd.Process.Pid)
	notify("READY=1", log)

	if len(srcs) == 0 {
		log.Warn("termsig: no platform source to watch: only forwarding signals", "sources", o.sources)
	}
	n := newNotifier(srcs, log, srv)
	defer n.Stop()
	s := &supervisor{o: o, log: log, proc: cmd.Process, kill: stoppedTimer(), extend: stoppedTimer(), holdEnd: stoppedTimer(), release: n.Release,
		ops: srv, m: newSuperviseMetrics(srv.Registerer(), o)}
	defer s.kill.Stop()
	defer s.extend.Stop()
	defer s.holdEnd.Stop()
	for {
		srv.Tick()
		select {
		case <-srv.Heartbeat():
		case sig := <-sigc:
			s.forward(sig)
		case nt := <-n.C():
			srv.Noticed(nt)
			s.notice(nt)
		case <-s.kill.C:
			log.Warn("termsig: the command is still running at its kill time: SIGKILL to its process group", "pgid", s.proc.Pid)
			s.killed = s.killGroup()
		case <-s.extend.C:
			s.extendTimeout()
		case <-s.holdEnd.C:
			s.holdOver()
		case err := <-exited:
			s.killLeftovers()
			code := s.exited(cmd, err)
			s.releaseHolds()
			s.outcome(code)
			return code
		}
	}
}

// minDrain is the least time the command gets between its stop signal
// and SIGKILL (at most --grace), even when the deadline minus the margin
// has passed: a notice found already posted at start still leaves a
// moment to hand work back.
const minDrain = 2 * time.Second

// A supervisor is the state of one supervised command.
type supervisor struct {
	o        *options
	log      *slog.Logger
	proc     *os.Process // the command; its pid is its process group's id
	kill     *time.Timer
	extend   *time.Timer
	killAt   time.Time      // zero until a notice stops the command
	stopSent bool           // a terminating signal has reached the command
	lastStop syscall.Signal // the last such signal
	stopping bool           // systemd was told STOPPING=1
	// release is termsig.Notifier.Release, for the notices that do not
	// stop the command (nothing waits for them), and for the holds once
	// the command has exited.
	release func(context.Context, termsig.Notice) error
	ops     *ops.Server       // Acted, Outcome; nil: none
	m       *superviseMetrics // nil: none
	acted   termsig.Notice    // the first notice that stopped the command or held it; zero: none
	killed  bool              // SIGKILL went to the command's group at its kill time

	// A hold: a held termination waits for the command to finish.
	holdEnd    *time.Timer
	holdFrom   time.Time // when the first held notice was seen; zero: none
	holdUntil  time.Time // when the wait ends, unless the command exits first
	holdCapped bool      // holdUntil is --max-hold after holdFrom
	finishSent bool      // the command got --finish-signal
	// held is the latest held notice of each held event acted on, in the
	// order the events came: released once the command has exited.
	held []termsig.Notice
}

// terminating are the signals that ask the command to stop.
func terminating(sig syscall.Signal) bool {
	return sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGQUIT
}

func (s *supervisor) forward(sig os.Signal) {
	s.log.Info("termsig: forwarding a signal to the command", "signal", termsig.SignalName(sig), "pid", s.proc.Pid)
	ss := sig.(syscall.Signal)
	s.send(ss, terminating(ss) || ss == s.o.signal)
}

// send signals the command (through its pidfd where the system has one,
// so never another process that reused its pid); a stop signal (one that
// asks it to stop, or to finish and exit) is followed by SIGCONT, as
// systemd does, so that a stopped command sees it.
func (s *supervisor) send(sig syscall.Signal, stop bool) {
	if err := s.proc.Signal(sig); err != nil {
		s.log.Warn("termsig: cannot signal the command", "signal", termsig.SignalName(sig), "err", err)
		return
	}
	s.m.sent(sig)
	if stop {
		s.stopSent, s.lastStop = true, sig
		if s.proc.Signal(syscall.SIGCONT) == nil {
			s.m.sent(syscall.SIGCONT)
		}
	}
}

// killGroup SIGKILLs the command's process group, and reports whether
// anything was left in it.
func (s *supervisor) killGroup() bool {
	if killGroup(s.proc.Pid) != nil {
		return false
	}
	s.m.sent(syscall.SIGKILL)
	return true
}

// notice handles a notice from a platform source: a held termination
// asks the command to finish (see holdOn); other imminent notices stop it
// (see stopNow).
func (s *supervisor) notice(nt termsig.Notice) {
	if !s.o.wants(nt) || !nt.Kind.Imminent() {
		s.log.Info("termsig: notice", "notice", nt, "acted", false)
		letGo(s.release, nt, s.log)
		return
	}
	known := s.isHeld(nt)
	if nt.Held {
		s.keepHeld(nt)
	}
	switch {
	case s.killAt.IsZero() && nt.Held && !nt.Deadline.IsZero():
		s.holdOn(nt)
		return
	case s.holding() && known && !nt.Held:
		s.log.Warn("termsig: the hold is over before the command exited: stopping it", "notice", nt)
	case s.holding() && nt.Held:
		s.log.Warn("termsig: a held notice without a deadline: stopping the command", "notice", nt)
	case s.holding():
		s.log.Warn("termsig: a hard notice during the hold: stopping the command", "notice", nt)
	}
	s.stopNow(nt)
}

// holding reports whether a hold is waiting for the command: it is not
// being stopped.
func (s *supervisor) holding() bool { return !s.holdFrom.IsZero() && s.killAt.IsZero() }

// holdOn handles a held notice while nothing stops the command: the first
// one sends it --finish-signal; each one moves the end of the wait (see
// holdEnds). Should that end have come already, the command is stopped.
func (s *supervisor) holdOn(nt termsig.Notice) {
	first := s.holdFrom.IsZero()
	if first {
		s.holdFrom = nt.Observed
		if s.holdFrom.IsZero() {
			s.holdFrom = time.Now()
		}
	}
	until, capped := s.holdEnds()
	if !until.After(time.Now()) {
		s.log.Warn("termsig: the hold's end (its deadline minus --margin, or --max-hold) has come: stopping the command", "notice", nt, "until", until)
		s.stopNow(nt)
		return
	}
	defer s.ops.Acted(nt) // the wait moved, and the first one signals the command
	s.actedOn(nt)
	if capped && !s.holdCapped {
		s.log.Warn("termsig: the hold may last longer than --max-hold: the wait for the command ends --max-hold after the first held notice", "notice", nt, "max_hold", s.o.maxHold, "until", until)
	}
	moved := !until.Equal(s.holdUntil)
	s.holdUntil, s.holdCapped = until, capped
	s.holdEnd.Reset(time.Until(until))
	s.extendTimeout()
	switch {
	case !first && moved:
		s.log.Info("termsig: the hold moved: the command has longer to finish", "notice", nt, "until", until)
	case !first:
		s.log.Info("termsig: another held notice; the hold's end stays", "notice", nt, "until", until)
	case s.stopSent:
		s.sayStopping()
		s.log.Warn("termsig: held termination; the command was already asked to stop: waiting for it to exit", "notice", nt, "until", until)
	default:
		s.sayStopping()
		s.log.Warn("termsig: held termination: asking the command to finish", "notice", nt, "signal", termsig.SignalName(s.o.finish), "until", until)
		s.send(s.o.finish, true)
		s.finishSent = true
	}
}

// holdEnds is when the wait for the command under the holds ends: the
// earliest of their deadlines (each the latest of its event) minus
// --margin, but at most --max-hold after the first held notice; capped
// says that the cap applies.
func (s *supervisor) holdEnds() (until time.Time, capped bool) {
	limit := s.holdFrom.Add(s.o.maxHold)
	for _, nt := range s.held {
		if end := nt.Deadline.Add(-s.o.margin); !nt.Deadline.IsZero() && (until.IsZero() || end.Before(until)) {
			until = end
		}
	}
	if until.IsZero() || until.After(limit) {
		return limit, true
	}
	return until, false
}

// holdOver ends the wait at the hold's end, with the command still
// running: it is stopped as for a hard notice with the hold's deadline
// (which has passed but for --margin, or is --max-hold away).
func (s *supervisor) holdOver() {
	if !s.holding() {
		return
	}
	nt := s.held[0]
	for _, h := range s.held[1:] {
		if h.Deadline.Before(nt.Deadline) {
			nt = h
		}
	}
	why := "its deadline minus --margin"
	if s.holdCapped {
		why = "--max-hold"
	}
	s.log.Warn("termsig: the hold's end ("+why+"), and the command still runs: stopping it", "notice", nt, "until", s.holdUntil)
	s.stopNow(nt)
}

// isHeld reports whether a held notice of nt's event came before.
func (s *supervisor) isHeld(nt termsig.Notice) bool {
	return slices.ContainsFunc(s.held, func(h termsig.Notice) bool { return sameEvent(h, nt) })
}

// keepHeld records nt as the latest held notice of its event.
func (s *supervisor) keepHeld(nt termsig.Notice) {
	if i := slices.IndexFunc(s.held, func(h termsig.Notice) bool { return sameEvent(h, nt) }); i >= 0 {
		s.held[i] = nt
		return
	}
	s.held = append(s.held, nt)
}

func sameEvent(a, b termsig.Notice) bool { return a.Source == b.Source && a.Event == b.Event }

// releaseHolds ends the holds termsig acted on, once the command has
// exited: the platform need not wait out the rest of them.
func (s *supervisor) releaseHolds() {
	for _, nt := range s.held {
		releaseNow(s.release, nt, s.log)
	}
}

// stopNow stops the command for imminent notice nt: --signal, and SIGKILL
// at its kill time; a later notice with an earlier kill time brings the
// SIGKILL forward. A command that was asked to stop already is not
// signalled again, unless what it got was --finish-signal and --signal
// differs: that is the harder request.
func (s *supervisor) stopNow(nt termsig.Notice) {
	at := s.killTime(nt)
	first := s.killAt.IsZero()
	if !first && !at.Before(s.killAt) {
		s.log.Info("termsig: another imminent notice; the kill time stays", "notice", nt, "kill_at", s.killAt)
		return
	}
	defer s.ops.Acted(nt) // SIGKILL moved, and the first one signals the command
	s.actedOn(nt)
	s.killAt = at
	s.kill.Reset(time.Until(at))
	if !first {
		s.log.Warn("termsig: an earlier deadline: SIGKILL moves forward", "notice", nt, "kill_at", at)
		s.extendTimeout()
		return
	}
	s.holdEnd.Stop()
	s.sayStopping()
	if s.stopSent && !(s.finishSent && s.lastStop != s.o.signal) {
		s.log.Warn("termsig: imminent notice; the command was already asked to stop", "notice", nt, "kill_at", at)
	} else {
		s.log.Warn("termsig: imminent notice: stopping the command", "notice", nt, "signal", termsig.SignalName(s.o.signal), "kill_at", at)
		s.send(s.o.signal, true)
	}
	s.extendTimeout()
}

// sayStopping tells systemd, once, that the command is being stopped.
func (s *supervisor) sayStopping() {
	if !s.stopping {
		s.stopping = true
		notify("STOPPING=1", s.log)
	}
}

// killTime is when the command is SIGKILLed after nt (options.drainEnd).
// When that time has passed already, the command gets min(minDrain,
// --grace) anyway, but no more than is left to a deadline still ahead.
func (s *supervisor) killTime(nt termsig.Notice) time.Time {
	at, capped := s.o.drainEnd(nt)
	if capped {
		s.log.Warn("termsig: the deadline is further than --max-drain after the notice: SIGKILL comes --max-drain after it", "notice", nt, "max_drain", s.o.maxDrain)
	}
	now := time.Now()
	if !at.Before(now) {
		return at
	}
	at = now.Add(min(minDrain, s.o.grace))
	if nt.Deadline.After(now) && nt.Deadline.Before(at) {
		at = nt.Deadline
	}
	s.log.Warn("termsig: the deadline minus the margin has passed: the command gets a moment anyway", "notice", nt, "kill_at", at)
	return at
}

// extendTimeout tells systemd, under which termsig may run, to wait for the
// drain until a little after the kill time (or the hold's end), and to be
// told again; past it it stops, so that systemd's own timeout applies.
func (s *supervisor) extendTimeout() {
	end := s.killAt
	if end.IsZero() {
		end = s.holdUntil // a hold waits for the command
	}
	left := time.Until(end)
	if left < 0 {
		return
	}
	notify(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", left.Microseconds()+extendEvery.Microseconds()), s.log)
	s.extend.Reset(extendEvery)
}

// actedOn keeps nt if it is the first notice the command was stopped or
// held for.
func (s *supervisor) actedOn(nt termsig.Notice) {
	if s.acted.Kind == 0 {
		s.acted = nt
	}
}

// The outcomes that supervise posts to the webhook, once the command has
// exited after a notice, with its exit status in field "status".
const (
	outcomeExited = "command exited" // before its kill time
	outcomeKilled = "command killed" // SIGKILLed at its kill time
)

// outcome posts, once the command has exited after a notice, how it
// ended. Without a notice the exit is only logged: it is the command's
// own business, and termsig exits with it.
func (s *supervisor) outcome(code int) {
	if s.acted.Kind == 0 {
		return
	}
	outcome := outcomeExited
	if s.killed {
		outcome = outcomeKilled
	}
	s.ops.Outcome(s.acted, outcome, map[string]string{"status": strconv.Itoa(code)})
}

// killLeftovers SIGKILLs, once the command has exited after a notice (a
// held one too), what it left in its process group: the host is going
// away, and the command's exit says its drain is over. Without a notice
// they are left alone.
func (s *supervisor) killLeftovers() {
	if s.killAt.IsZero() && s.holdFrom.IsZero() {
		return
	}
	if s.killGroup() {
		s.log.Warn("termsig: the command exited after a notice: SIGKILL to what it left in its process group", "pgid", s.proc.Pid)
	}
}

func (s *supervisor) exited(cmd *exec.Cmd, err error) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		s.log.Error("termsig: waiting for the command failed", "err", err)
		return exitFailed
	}
	code := exitStatus(cmd.ProcessState)
	s.log.Info("termsig: command exited", "status", code, "state", cmd.ProcessState.String())
	return code
}

// startStatus is what a shell returns for a command it cannot start: 127
// when it is not found, 126 when it cannot be run.
func startStatus(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return exitNoChild
	}
	return exitNoChild - 1
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// notify sends state to systemd when termsig runs under it (NOTIFY_SOCKET);
// elsewhere it does nothing.
func notify(state string, log *slog.Logger) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("termsig: sd_notify failed", "state", state, "err", err)
	}
}

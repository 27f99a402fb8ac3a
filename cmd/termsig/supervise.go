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
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/termsig/termsig"
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
func supervise(o *options, srcs []termsig.Source, log *slog.Logger) int {
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
	n := newNotifier(srcs, log)
	defer n.Stop()
	s := &supervisor{o: o, log: log, proc: cmd.Process, kill: stoppedTimer(), extend: stoppedTimer(), release: n.Release}
	defer s.kill.Stop()
	defer s.extend.Stop()
	for {
		select {
		case sig := <-sigc:
			s.forward(sig)
		case nt := <-n.C():
			s.notice(nt)
		case <-s.kill.C:
			log.Warn("termsig: the command is still running at its kill time: SIGKILL to its process group", "pgid", s.proc.Pid)
			_ = killGroup(s.proc.Pid)
		case <-s.extend.C:
			s.extendTimeout()
		case err := <-exited:
			s.killLeftovers()
			return s.exited(cmd, err)
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
	killAt   time.Time // zero until a notice stops the command
	stopSent bool      // a terminating signal has reached the command
	// release is termsig.Notifier.Release, for the notices that do not
	// stop the command: nothing waits for them.
	release func(context.Context, termsig.Notice) error
}

// terminating are the signals that ask the command to stop.
func terminating(sig syscall.Signal) bool {
	return sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGQUIT
}

func (s *supervisor) forward(sig os.Signal) {
	s.log.Info("termsig: forwarding a signal to the command", "signal", termsig.SignalName(sig), "pid", s.proc.Pid)
	s.send(sig.(syscall.Signal))
}

// send signals the command (through its pidfd where the system has one,
// so never another process that reused its pid); a stop signal is followed
// by SIGCONT, as systemd does, so that a stopped command sees it.
func (s *supervisor) send(sig syscall.Signal) {
	if err := s.proc.Signal(sig); err != nil {
		s.log.Warn("termsig: cannot signal the command", "signal", termsig.SignalName(sig), "err", err)
		return
	}
	if terminating(sig) || sig == s.o.signal {
		s.stopSent = true
		_ = s.proc.Signal(syscall.SIGCONT)
	}
}

// notice handles a notice from a platform source: imminent ones stop the
// command; a later one with an earlier deadline brings SIGKILL forward.
func (s *supervisor) notice(nt termsig.Notice) {
	if !s.o.wants(nt) || !nt.Kind.Imminent() {
		s.log.Info("termsig: notice", "notice", nt, "acted", false)
		letGo(s.release, nt, s.log)
		return
	}
	at := s.killTime(nt)
	first := s.killAt.IsZero()
	if !first && !at.Before(s.killAt) {
		s.log.Info("termsig: another imminent notice; the kill time stays", "notice", nt, "kill_at", s.killAt)
		return
	}
	s.killAt = at
	s.kill.Reset(time.Until(at))
	if !first {
		s.log.Warn("termsig: an earlier deadline: SIGKILL moves forward", "notice", nt, "kill_at", at)
		s.extendTimeout()
		return
	}
	notify("STOPPING=1", s.log)
	if s.stopSent {
		s.log.Warn("termsig: imminent notice; the command was already asked to stop", "notice", nt, "kill_at", at)
	} else {
		s.log.Warn("termsig: imminent notice: stopping the command", "notice", nt, "signal", termsig.SignalName(s.o.signal), "kill_at", at)
		s.send(s.o.signal)
	}
	s.extendTimeout()
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
// drain until a little after the kill time, and to be told again; past
// the kill time it stops, so that systemd's own timeout applies.
func (s *supervisor) extendTimeout() {
	left := time.Until(s.killAt)
	if left < 0 {
		return
	}
	notify(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", left.Microseconds()+extendEvery.Microseconds()), s.log)
	s.extend.Reset(extendEvery)
}

// killLeftovers SIGKILLs, once the command has exited after a notice,
// what it left in its process group: the host is going away, and the
// command's exit says its drain is over. Without a notice they are left
// alone.
func (s *supervisor) killLeftovers() {
	if s.killAt.IsZero() {
		return
	}
	if killGroup(s.proc.Pid) == nil {
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

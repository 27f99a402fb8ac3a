//go:build unix

package main

import (
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

// forwarded are the signals watch passes on to the command as they are.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// extendEvery is how often systemd is told again, while the command
// drains, that watch needs until the kill time (EXTEND_TIMEOUT_USEC).
const extendEvery = 5 * time.Second

// supervise runs o.cmd in a process group of its own and returns its exit
// status (128+N if it died of signal N). Signals that watch receives are
// forwarded; an imminent platform notice sends the command o.signal, and
// SIGKILL to its whole group at the deadline minus o.margin, or o.grace
// later when the notice has no deadline.
func supervise(o *options, srcs []termsig.Source, log *slog.Logger) int {
	// Before the command starts, so that a signal in between is forwarded,
	// not watch's death.
	sigc := make(chan os.Signal, 32)
	ossignal.Notify(sigc, forwarded...)
	defer ossignal.Stop(sigc)

	cmd := exec.Command(o.cmd[0], o.cmd[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Error("watch: cannot start the command", "cmd", o.cmd[0], "err", err)
		return startStatus(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	log.Info("watch: command started", "cmd", o.cmd[0], "pid", cmd.Process.Pid)
	notify("READY=1", log)

	if len(srcs) == 0 {
		log.Warn("watch: no platform source to watch: only forwarding signals", "sources", o.sources)
	}
	n := newNotifier(srcs, log)
	defer n.Stop()
	s := &supervisor{o: o, log: log, pid: cmd.Process.Pid, kill: stoppedTimer(), extend: stoppedTimer()}
	defer s.kill.Stop()
	defer s.extend.Stop()
	for {
		select {
		case sig := <-sigc:
			s.forward(sig)
		case nt := <-n.C():
			s.notice(nt)
		case <-s.kill.C:
			log.Warn("watch: the command is still running at its kill time: SIGKILL to its process group", "pgid", s.pid)
			_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		case <-s.extend.C:
			s.extendTimeout()
		case err := <-exited:
			return s.exited(cmd, err)
		}
	}
}

// A supervisor is the state of one supervised command.
type supervisor struct {
	o      *options
	log    *slog.Logger
	pid    int // the command's, and its process group's
	kill   *time.Timer
	extend *time.Timer
	killAt time.Time // zero until a notice stops the command
}

func (s *supervisor) forward(sig os.Signal) {
	s.log.Info("watch: forwarding a signal to the command", "signal", termsig.SignalName(sig), "pid", s.pid)
	if err := syscall.Kill(s.pid, sig.(syscall.Signal)); err != nil {
		s.log.Warn("watch: cannot forward the signal", "signal", termsig.SignalName(sig), "err", err)
	}
}

// notice handles a notice from a platform source: imminent ones stop the
// command; a later one with an earlier deadline brings SIGKILL forward.
func (s *supervisor) notice(nt termsig.Notice) {
	if !s.o.wants(nt) || !nt.Kind.Imminent() {
		s.log.Info("watch: notice", "notice", nt, "acted", false)
		return
	}
	at := nt.Observed.Add(s.o.grace)
	if !nt.Deadline.IsZero() {
		at = nt.Deadline.Add(-s.o.margin)
	}
	first := s.killAt.IsZero()
	if !first && !at.Before(s.killAt) {
		s.log.Info("watch: another imminent notice; the kill time stays", "notice", nt, "kill_at", s.killAt)
		return
	}
	s.killAt = at
	s.kill.Reset(time.Until(at))
	if !first {
		s.log.Warn("watch: an earlier deadline: SIGKILL moves forward", "notice", nt, "kill_at", at)
		s.extendTimeout()
		return
	}
	s.log.Warn("watch: imminent notice: stopping the command", "notice", nt, "signal", termsig.SignalName(s.o.signal), "kill_at", at)
	notify("STOPPING=1", s.log)
	if err := syscall.Kill(s.pid, s.o.signal); err != nil {
		s.log.Warn("watch: cannot signal the command", "err", err)
	}
	s.extendTimeout()
}

// extendTimeout tells systemd, under which watch may run, to wait for the
// drain until a little after the kill time, and to be told again.
func (s *supervisor) extendTimeout() {
	left := max(time.Until(s.killAt), 0) + extendEvery
	notify(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", left.Microseconds()), s.log)
	s.extend.Reset(extendEvery)
}

func (s *supervisor) exited(cmd *exec.Cmd, err error) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		s.log.Error("watch: waiting for the command failed", "err", err)
		return exitFailed
	}
	code := exitStatus(cmd.ProcessState)
	s.log.Info("watch: command exited", "status", code, "state", cmd.ProcessState.String())
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

// notify sends state to systemd when watch runs under it (NOTIFY_SOCKET);
// elsewhere it does nothing.
func notify(state string, log *slog.Logger) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("watch: sd_notify failed", "state", state, "err", err)
	}
}

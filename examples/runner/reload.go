//go:build linux

package main

import (
	"os"
	ossignal "os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/termsig/termsig"
)

// runnerIDEnv tells the image that a SIGHUP re-executes which registration
// to resume. Its token is in the state file, not in the environment.
const runnerIDEnv = "TERMSIG_RUNNER_ID"

// requestReload handles SIGHUP, "finish, then restart": the runner claims
// no new job (see mayClaim), and the loop re-executes it once the current
// job has ended and its result is reported.
func (r *runner) requestReload(nt termsig.Notice) {
	r.reload = true
	if r.job != nil {
		r.tl.Printf("reload requested (%s): finishing job %s, then re-executing; the registration is kept", nt.Reason, r.job.job.ID)
	}
}

// restart re-executes the runner's binary in place (same pid, so systemd
// keeps tracking it), keeping the registration. It returns only if exec
// fails, with a failure status so that systemd restarts the runner rather
// than leaving it dead.
func (r *runner) restart() int {
	exe, err := os.Executable()
	if err == nil {
		r.tl.Printf("re-executing %s, keeping registration %s", exe, r.reg.ID)
		r.save() // the new image takes the registration's token from the state file
		r.notify("RELOADING=1")
		// Until the new image installs its handler, a second SIGHUP must
		// not kill the runner: an ignored signal stays ignored across
		// execve, and Go keeps an inherited SIG_IGN for SIGHUP until
		// signal.Notify asks for it. (SIGTERM cannot be carried over that
		// way: a SIGTERM after the sources have stopped ends the runner,
		// which is what SIGTERM asks for, and its registration is removed
		// by the next start or its lease.)
		ossignal.Ignore(syscall.SIGHUP)
		if nt, ok := r.stopForExec(); ok {
			r.tl.Printf("notice while re-executing: %v; draining instead", nt)
			r.notices = nil // closed: the drain must not read it
			return r.drain(nt)
		}
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, runnerIDEnv+"=") })
		// The new image listens on the same addresses: these must be
		// free, and what the webhook has queued posted.
		r.ops.Close()
		err = syscall.Exec(exe, os.Args, append(env, runnerIDEnv+"="+r.reg.ID))
	}
	r.tl.Printf("re-exec failed: %v; exit %d so that systemd restarts the runner", err, exitReexec)
	return exitReexec
}

// stopForExec stops the sources and returns an imminent notice that came
// before they stopped (a SIGTERM right after the SIGHUP), which must not
// be lost in the exec. A signal the signal source had taken but not yet
// handed over when it stopped is caught by a channel of the runner's own,
// registered before the stop and removed after it; from then on a SIGTERM
// ends the runner by its default action.
func (r *runner) stopForExec() (termsig.Notice, bool) {
	guard := make(chan os.Signal, 4)
	ossignal.Notify(guard, syscall.SIGTERM, syscall.SIGINT)
	r.stop()
	ossignal.Stop(guard)        // no more deliveries to guard after this
	for nt := range r.notices { // closed by stop: this ends
		r.ops.Noticed(nt)
		if nt.Kind.Imminent() {
			return nt, true
		}
	}
	select {
	case sig := <-guard:
		kind, name := termsig.Terminate, termsig.SignalName(sig)
		if sig == syscall.SIGINT {
			kind = termsig.Interrupt
		}
		nt := termsig.Notice{Source: "signal", Kind: kind, Event: name, Reason: name, Signal: sig, Observed: time.Now()}
		r.ops.Noticed(nt) // as the signal source would have handed it over
		return nt, true
	default:
		return termsig.Notice{}, false
	}
}

// Command termsig brings termsig to programs that are not written in Go. It
// watches the termination notices of the host it runs on (a spot
// interruption, a preemption, a power-button press, maintenance, a
// shutdown) and turns them into what any program understands:
//
//	termsig print     [flags]                  # each notice as one JSON line
//	termsig hook      [flags] 'SHELL COMMAND'  # a shell hook per notice
//	termsig supervise [flags] -- CMD ARGS...   # run CMD: a platform notice becomes SIGTERM
//	termsig sources   [flags]                  # which sources apply here, and why not
//	termsig fake      imds|gce|azure|alibaba|tencent [flags]   # a cloud's metadata service with a scripted event
//	termsig version
//
// A held termination (an Auto Scaling scale-in kept waiting by a lifecycle
// hook) asks the supervised command to finish instead (--finish-signal),
// waits for it (at most --max-hold), then lets the instance go.
//
// print, hook and supervise need Linux or macOS (process groups and
// /bin/sh), and serve Prometheus metrics and health probes with
// --metrics-bind-address and --health-probe-bind-address. See README.md
// for the flags, the metrics, the exit statuses and recipes (a systemd
// unit, a Kubernetes sidecar, a webhook, a try-out without a cloud).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	ossignal "os/signal"
	"syscall"

	"github.com/termsig/termsig/cmd/termsig/internal/fake"
	"github.com/termsig/termsig/cmd/termsig/internal/sourcescmd"
	"github.com/termsig/termsig/internal/buildinfo"
)

// Exit statuses of termsig itself; in supervise mode termsig exits with
// the command's status instead.
const (
	exitOK      = 0
	exitFailed  = 1 // a hook failed, or termsig could not start
	exitUsage   = 2
	exitNoChild = 127 // the command could not be started, as a shell says
)

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage: termsig COMMAND [flags] [args]

termsig watches the termination notices of this host (a spot interruption,
a preemption, the power button, maintenance, a shutdown, a signal) for
programs that are not written in Go.

  termsig print     [flags]                  print each notice as one JSON line
  termsig hook      [flags] 'SHELL COMMAND'  run a shell command (/bin/sh -c) per notice
  termsig supervise [flags] -- CMD ARGS...   run CMD; an imminent platform notice sends it
                                             SIGTERM, then SIGKILL before the deadline; a held
                                             termination (an Auto Scaling hook) asks it to finish
                                             (--finish-signal), waits for it up to --max-hold,
                                             then releases the hold
  termsig sources   [flags]                  which sources apply on this host, and why not
  termsig fake      imds|gce|azure|alibaba|tencent [flags]   serve a cloud's metadata fake with a scripted event
  termsig version                            print the version (also: termsig --version)

"termsig COMMAND -h" lists a command's flags.
`

// realMain runs the command named by args[0] and returns the exit status.
func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "version", "-version", "--version":
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "termsig %s: takes no arguments, not %q\n", cmd, rest[0])
			return exitUsage
		}
		fmt.Fprintln(stdout, buildinfo.Line("termsig"))
		return exitOK
	case "print", "hook", "supervise":
		return watchMain(cmd, rest, stdout, stderr)
	case "sources":
		ctx, stop := interruptible()
		defer stop()
		return sourcescmd.Main(ctx, rest, stdout, stderr)
	case "fake":
		ctx, stop := interruptible()
		defer stop()
		return fake.Main(ctx, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "termsig: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}

// interruptible returns a context that SIGINT or SIGTERM ends.
func interruptible() (context.Context, context.CancelFunc) {
	return ossignal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
)

// minHookTime is the least time a hook gets, even when the deadline minus
// the margin has already passed: it may still do something useful.
const minHookTime = time.Second

// maxHookOutput bounds what is kept of a hook's output for the log.
const maxHookOutput = 64 << 10

// runHooks runs o.exec once per notice until the first imminent one (see
// options.ends), then waits for the hooks under way. Hooks for the same
// event (the same source and Notice.Event) run one after another; while
// one runs, only the latest notice of that event waits its turn. A held
// event has one hook, however often its hold moves (see
// hookRunner.again). It returns exitFailed if a hook failed or timed out,
// or if no source can work here. srv counts the notices and the hooks,
// and watches the loop, also while it waits for the last hooks; nil:
// nothing does.
func runHooks(o *options, srcs []termsig.Source, log *slog.Logger, srv *ops.Server) int {
	n := newNotifier(srcs, log, srv)
	defer n.Stop()
	h := &hookRunner{o: o, log: log, release: n.Release, queues: map[eventKey]*hookQueue{}, ops: srv, m: newHookMetrics(srv.Registerer())}
	ready := n.Ready()
	for ended := false; !ended; {
		srv.Tick()
		select {
		case <-srv.Heartbeat():
		case <-ready:
			if nothingRuns(n, log) {
				return exitFailed
			}
			ready = nil
		case nt := <-n.C():
			srv.Noticed(nt)
			if !o.wants(nt) {
				log.Debug("termsig: notice filtered out by --kinds", "notice", nt)
				letGo(n.Release, nt, log)
				continue
			}
			if h.again(nt) {
				continue
			}
			ended = o.ends(nt)
			h.enqueue(nt, ended)
		}
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		srv.Tick()
		select {
		case <-srv.Heartbeat():
		case <-done:
			waiting = false
		}
	}
	if h.failed() {
		return exitFailed
	}
	return exitOK
}

type eventKey struct{ source, event string }

// A hookQueue is the hook running for one event and the one waiting.
type hookQueue struct {
	next    *termsig.Notice // waiting; a newer notice replaces it
	running bool
}

// A hookRunner runs the hooks, one goroutine per event while it has work.
type hookRunner struct {
	o   *options
	log *slog.Logger
	wg  sync.WaitGroup
	// release is termsig.Notifier.Release: called once the hook of an
	// imminent notice is over, so that logind's delay lock lets the
	// shutdown go on at once (with --follow, termsig itself goes on). Nil:
	// nothing to tell.
	release func(context.Context, termsig.Notice) error
	ops     *ops.Server  // Acted; nil: none
	m       *hookMetrics // nil: none

	mu     sync.Mutex
	queues map[eventKey]*hookQueue
	ending bool // the final notice came: waiting hooks of other events are dropped
	nfail  int
	// held is the latest held notice of each held event that has had its
	// hook (run, under way or waiting): released when the hook is over.
	held map[eventKey]termsig.Notice
}

// again reports whether nt is a later notice of a held event that has had
// its hook: its hold moved (it is still Held, with a later Deadline), or
// the hold is over (it is not Held). Either is logged, and runs nothing:
// a hook runs once per event, not once per move. The hook was told at its
// start that the host is held (TERMSIG_HELD=1, TERMSIG_HOLD_LIMIT), and
// the hold is released when it ends. Running it again on each move would
// repeat its work; and by the time a hold is over, the event's hook has
// run or is running.
func (h *hookRunner) again(nt termsig.Notice) bool {
	k := eventKey{nt.Source, nt.Event}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, seen := h.held[k]
	switch {
	case !seen && nt.Held:
		if h.held == nil {
			h.held = map[eventKey]termsig.Notice{}
		}
		h.held[k] = nt
		return false
	case !seen:
		return false
	case nt.Held:
		h.held[k] = nt
		h.log.Info("termsig: the hold moved; its hook is not run again", "notice", nt)
	default:
		h.log.Warn("termsig: the hold is over; its hook is not run again", "notice", nt)
	}
	return true
}

// enqueue hands nt to its event's queue; final marks the notice that ends
// termsig, after which hooks that have not started are dropped.
func (h *hookRunner) enqueue(nt termsig.Notice, final bool) {
	k := eventKey{nt.Source, nt.Event}
	h.mu.Lock()
	defer h.mu.Unlock()
	if final {
		h.ending = true
		for _, q := range h.queues {
			q.next = nil
		}
	}
	q := h.queues[k]
	if q == nil {
		q = &hookQueue{}
		h.queues[k] = q
	}
	if q.next != nil {
		h.log.Info("termsig: a newer notice of the same event replaces a hook not yet started", "notice", nt)
	}
	q.next = &nt
	if !q.running {
		q.running = true
		h.wg.Go(func() { h.drain(k, q) })
	}
}

// drain runs q's hooks until none waits.
func (h *hookRunner) drain(k eventKey, q *hookQueue) {
	for {
		h.mu.Lock()
		nt := q.next
		q.next = nil
		if nt == nil {
			q.running = false
			delete(h.queues, k)
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		if err := h.run(*nt); err != nil {
			h.mu.Lock()
			h.nfail++
			h.mu.Unlock()
		}
		h.releaseAfter(*nt)
	}
}

// releaseAfter tells nt's source that its hook is over, whether it
// succeeded or not: holding the shutdown longer helps nobody. A held
// event is released with its latest held notice.
func (h *hookRunner) releaseAfter(nt termsig.Notice) {
	if !nt.Kind.Imminent() {
		return
	}
	if nt.Held {
		h.mu.Lock()
		if latest, ok := h.held[eventKey{nt.Source, nt.Event}]; ok {
			nt = latest
		}
		h.mu.Unlock()
	}
	releaseNow(h.release, nt, h.log)
}

func (h *hookRunner) failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nfail > 0
}

// run runs the hook for nt in its own process group, killed whole at its
// timeout and once the hook has exited (what it left in the background
// goes with it), and logs its output and status.
func (h *hookRunner) run(nt termsig.Notice) error {
	timeout := h.timeout(nt)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	payload, err := json.Marshal(nt)
	if err != nil {
		h.log.Error("termsig: cannot encode the notice for the hook", "err", err)
		h.m.ran(hookFailed)
		return err
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", h.o.exec)
	cmd.Env = append(childEnviron(), noticeEnv(nt, time.Now())...)
	cmd.Stdin = bytes.NewReader(append(payload, '\n'))
	var out cappedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	killGroupOnCancel(cmd)
	start := time.Now()
	h.ops.Acted(nt) // the hook starts
	err = cmd.Run()
	if cmd.Process != nil {
		_ = killGroup(cmd.Process.Pid) // leftovers of the hook
	}
	return h.report(nt, cmd, err, ctx.Err() != nil, timeout, time.Since(start), out.String())
}

// report counts and logs how a hook ended (counted first, so that whoever
// reads the line sees it counted) and returns an error if it failed.
func (h *hookRunner) report(nt termsig.Notice, cmd *exec.Cmd, err error, timedOut bool, timeout, took time.Duration, out string) error {
	attrs := []any{"notice", nt, "took", took.Round(time.Millisecond), "output", out}
	code := exitNoChild
	if cmd.ProcessState != nil {
		code = exitStatus(cmd.ProcessState)
	}
	switch {
	case timedOut:
		h.m.ran(hookTimeout)
		h.log.Error("termsig: hook killed at its timeout", append(attrs, "timeout", timeout)...)
		return context.DeadlineExceeded
	case errors.Is(err, exec.ErrWaitDelay) && code == 0:
		// The hook exited 0 but left a process holding its output.
		h.m.ran(hookOK)
		h.log.Warn("termsig: hook done; it left a background process, killed", append(attrs, "status", 0)...)
		return nil
	case err != nil || code != 0:
		h.m.ran(hookFailed)
		h.log.Error("termsig: hook failed", append(attrs, "status", code, "err", err)...)
		return errors.Join(err, errors.New("exit status "+strconv.Itoa(code)))
	}
	h.m.ran(hookOK)
	h.log.Info("termsig: hook done", append(attrs, "status", 0)...)
	return nil
}

// timeout is --hook-timeout; or, for an imminent notice, the time left
// to options.drainEnd (at least minHookTime), and --grace when it has no
// deadline; or --grace for advice, whose deadline may be weeks away. A
// held notice counts as any imminent one: its hook has the time its
// deadline gave when it started, and a later move of the hold does not
// lengthen it.
func (h *hookRunner) timeout(nt termsig.Notice) time.Duration {
	switch {
	case h.o.hookTimeout > 0:
		return h.o.hookTimeout
	case nt.Deadline.IsZero() || !nt.Kind.Imminent():
		return h.o.grace
	}
	end, _ := h.o.drainEnd(nt)
	return max(time.Until(end), minHookTime)
}

// noticeEnv is nt as TERMSIG_* environment variables, at time now.
func noticeEnv(nt termsig.Notice, now time.Time) []string {
	deadline, left, held, limit := "", "", "0", ""
	if !nt.Deadline.IsZero() {
		deadline = nt.Deadline.UTC().Format(time.RFC3339)
		left = strconv.Itoa(max(int(nt.Deadline.Sub(now).Seconds()), 0))
	}
	if nt.Held {
		held = "1"
	}
	if !nt.HoldLimit.IsZero() {
		limit = nt.HoldLimit.UTC().Format(time.RFC3339)
	}
	return []string{
		"TERMSIG_SOURCE=" + nt.Source,
		"TERMSIG_KIND=" + nt.Kind.String(),
		"TERMSIG_EVENT=" + nt.Event,
		"TERMSIG_REASON=" + nt.Reason,
		"TERMSIG_DEADLINE=" + deadline,
		"TERMSIG_SECONDS_LEFT=" + left,
		"TERMSIG_HELD=" + held,
		"TERMSIG_HOLD_LIMIT=" + limit,
	}
}

// childEnviron is termsig's environment for a hook or the supervised command,
// without NOTIFY_SOCKET: systemd's notifications are termsig's to send.
func childEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			env = append(env, kv)
		}
	}
	return env
}

// killGroupOnCancel puts cmd in a process group of its own, and makes the
// cancellation of its context kill that whole group, so that a hook's own
// children do not outlive its timeout.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	// A background process of the hook could hold the output pipe open.
	cmd.WaitDelay = time.Second
}

// killGroup sends SIGKILL to the process group pgid: a command or a hook
// started with Setpgid, and whatever it started that is still in its
// group. It fails with ESRCH when none of them is left.
func killGroup(pgid int) error { return syscall.Kill(-pgid, syscall.SIGKILL) }

// exitStatus is ps's exit code, or 128+N when the process died of signal
// N, as a shell reports it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// A cappedBuffer keeps the first maxHookOutput bytes written to it.
type cappedBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	dropped int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p) // all of it is taken, kept or not: the hook must not block
	room := max(maxHookOutput-c.b.Len(), 0)
	if room < len(p) {
		c.dropped += len(p) - room
		p = p[:room]
	}
	c.b.Write(p)
	return n, nil
}

func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped > 0 {
		return c.b.String() + "… (" + strconv.Itoa(c.dropped) + " more bytes dropped)"
	}
	return c.b.String()
}

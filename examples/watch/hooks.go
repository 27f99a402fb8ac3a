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
	"sync"
	"syscall"
	"time"

	"github.com/termsig/termsig"
)

// minHookTime is the least time a hook gets, even when the deadline minus
// the margin has already passed: it may still do something useful.
const minHookTime = time.Second

// maxHookOutput bounds what is kept of a hook's output for the log.
const maxHookOutput = 64 << 10

// runHooks runs o.exec once per notice until the first imminent one (see
// options.ends), then waits for the hooks under way. Hooks for the same
// event (the same source and Notice.Event) run one after another, in
// order; hooks for different events may run at the same time. It returns
// exitFailed if a hook failed or timed out.
func runHooks(o *options, srcs []termsig.Source, log *slog.Logger) int {
	n := newNotifier(srcs, log)
	defer n.Stop()
	h := &hookRunner{o: o, log: log, queues: map[eventKey][]termsig.Notice{}}
	for nt := range n.C() {
		if !o.wants(nt) {
			log.Debug("watch: notice filtered out by --kinds", "notice", nt)
			continue
		}
		h.enqueue(nt)
		if o.ends(nt) {
			break
		}
	}
	h.wg.Wait()
	if h.failed() {
		return exitFailed
	}
	return exitOK
}

type eventKey struct{ source, event string }

// A hookRunner keeps one queue of notices per event, each drained by its
// own goroutine while it is not empty.
type hookRunner struct {
	o   *options
	log *slog.Logger
	wg  sync.WaitGroup

	mu     sync.Mutex
	queues map[eventKey][]termsig.Notice // an entry exists while a goroutine drains it
	nfail  int
}

func (h *hookRunner) enqueue(nt termsig.Notice) {
	k := eventKey{nt.Source, nt.Event}
	h.mu.Lock()
	q, busy := h.queues[k]
	h.queues[k] = append(q, nt)
	h.mu.Unlock()
	if !busy {
		h.wg.Go(func() { h.drain(k) })
	}
}

// drain runs the hooks of k's queue in order until it is empty.
func (h *hookRunner) drain(k eventKey) {
	for {
		h.mu.Lock()
		q := h.queues[k]
		if len(q) == 0 {
			delete(h.queues, k)
			h.mu.Unlock()
			return
		}
		nt := q[0]
		h.queues[k] = q[1:]
		h.mu.Unlock()
		if err := h.run(nt); err != nil {
			h.mu.Lock()
			h.nfail++
			h.mu.Unlock()
		}
	}
}

func (h *hookRunner) failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nfail > 0
}

// run runs the hook for nt in its own process group, killed whole at its
// timeout, and logs its output and status.
func (h *hookRunner) run(nt termsig.Notice) error {
	timeout := h.timeout(nt)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	payload, err := json.Marshal(nt)
	if err != nil {
		h.log.Error("watch: cannot encode the notice for the hook", "err", err)
		return err
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", h.o.exec)
	cmd.Env = append(os.Environ(), noticeEnv(nt, time.Now())...)
	cmd.Stdin = bytes.NewReader(append(payload, '\n'))
	var out cappedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	killGroupOnCancel(cmd)
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start).Round(time.Millisecond)
	attrs := []any{"notice", nt, "took", took, "output", out.String()}
	switch {
	case ctx.Err() != nil:
		h.log.Error("watch: hook killed at its timeout", append(attrs, "timeout", timeout)...)
		return ctx.Err()
	case err != nil:
		h.log.Error("watch: hook failed", append(attrs, "status", status(err))...)
		return err
	}
	h.log.Info("watch: hook done", append(attrs, "status", 0)...)
	return nil
}

// timeout is --hook-timeout, or the time to nt's deadline minus the
// margin, or --grace when nt has none; at least minHookTime.
func (h *hookRunner) timeout(nt termsig.Notice) time.Duration {
	switch {
	case h.o.hookTimeout > 0:
		return h.o.hookTimeout
	case nt.Deadline.IsZero():
		return h.o.grace
	}
	return max(time.Until(nt.Deadline)-h.o.margin, minHookTime)
}

// noticeEnv is nt as TERMSIG_* environment variables, at time now.
func noticeEnv(nt termsig.Notice, now time.Time) []string {
	deadline, left := "", ""
	if !nt.Deadline.IsZero() {
		deadline = nt.Deadline.UTC().Format(time.RFC3339)
		left = strconv.Itoa(max(int(nt.Deadline.Sub(now).Seconds()), 0))
	}
	return []string{
		"TERMSIG_SOURCE=" + nt.Source,
		"TERMSIG_KIND=" + nt.Kind.String(),
		"TERMSIG_EVENT=" + nt.Event,
		"TERMSIG_REASON=" + nt.Reason,
		"TERMSIG_DEADLINE=" + deadline,
		"TERMSIG_SECONDS_LEFT=" + left,
	}
}

// killGroupOnCancel puts cmd in a process group of its own, and makes the
// cancellation of its context kill that whole group, so that a hook's own
// children do not outlive its timeout.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child left in another group could hold the output pipe open.
	cmd.WaitDelay = time.Second
}

// status is the exit status a shell would report for err from Wait.
func status(err error) int {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return exitNoChild
	}
	return exitStatus(ee.ProcessState)
}

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

//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A child is a running run.sh, in a process group of its own, whose
// standard output ghrunner copies to its own, reading from it whether the
// runner is running a job.
type child struct {
	pid    int
	done   chan struct{} // closed once run.sh has exited and its output is read
	reaped atomic.Bool   // run.sh has exited and its group was killed
	// status is run.sh's exit status (128+N for signal N), set before done
	// is closed.
	status int

	mu      sync.Mutex
	busy    bool           // the listener said "Running job", and not yet that it completed
	job     string         // the job it said it runs
	started int            // how many jobs it said it runs
	ended   int            // how many jobs it said completed
	results map[int]string // the result it said of its n-th job
	changed chan struct{}
}

// maxLine is the longest output line parsed; longer ones are copied in
// pieces and not parsed.
const maxLine = 64 << 10

// outputGrace is how long run.sh's output is read after it exits: a job's
// process that left the group may hold the pipe open.
const outputGrace = time.Second

// startRunSh starts dir/run.sh with its output copied to out.
func startRunSh(dir string, as *runAs, out io.Writer) (*child, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(dir, "run.sh"))
	cmd.Dir = dir
	cmd.Env = childEnv(as)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = as.sysProcAttr()
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start run.sh: %w", err)
	}
	c := &child{pid: cmd.Process.Pid, done: make(chan struct{}), changed: make(chan struct{}, 1)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		c.copyOutput(r, out)
	}()
	go func() {
		err := cmd.Wait()
		c.status = exitStatus(cmd.ProcessState, err)
		// What run.sh left in its group (a job's background process that
		// ignores SIGINT, as bash makes them) goes with it: nothing of a
		// runner outlives its run.sh, across a restart or at the end.
		c.kill()
		c.reaped.Store(true) // no SIGKILL to its group id after this one
		_ = r.SetReadDeadline(time.Now().Add(outputGrace))
		<-read
		r.Close()
		close(c.done)
	}()
	return c, nil
}

func exitStatus(ps *os.ProcessState, err error) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return exitFailed
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// copyOutput copies run.sh's output line by line to out, and follows what
// the listener says of its jobs.
func (c *child) copyOutput(r io.Reader, out io.Writer) {
	br := bufio.NewReaderSize(r, maxLine)
	long := false // inside a line longer than maxLine
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if !long {
				c.parse(line) // first: whoever reads the line sees its effect
			}
			_, _ = out.Write(line)
			long = errors.Is(err, bufio.ErrBufferFull)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// The listener's lines about jobs, as Runner.Listener prints them
// ("{DateTime.UtcNow:u}: Running job: NAME", "...: Job NAME completed with
// result: RESULT"). They are anchored at both ends, and the completion is
// tried first, so that a job whose name holds "Running job: " is not
// taken for another job.
var (
	completedLine = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: Job (.*) completed with result: (Succeeded|SucceededWithIssues|Failed|Canceled|Skipped|Abandoned)$`)
	runningLine   = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: Running job: (.*)$`)
)

// parse follows the listener's lines about its jobs.
func (c *child) parse(line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := completedLine.FindSubmatch(line); m != nil {
		if c.busy {
			if c.results == nil {
				c.results = map[int]string{}
			}
			c.results[c.started] = string(m[2])
		}
		c.busy, c.job = false, ""
		c.ended++
	} else if m := runningLine.FindSubmatch(line); m != nil {
		c.busy, c.job = true, string(m[1])
		c.started++
	} else {
		return
	}
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// state returns whether the runner runs a job, which, and how many it
// has completed.
func (c *child) state() (busy bool, job string, ended int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy, c.job, c.ended
}

// result returns what the listener said of the n-th job's end ("" while
// it has not said).
func (c *child) result(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.results[n]
}

// jobsStarted returns how many jobs the runner said it took.
func (c *child) jobsStarted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// interrupt sends SIGINT to run.sh's process group, as Ctrl-C in its
// terminal would: run.sh does not pass signals on, the listener takes
// them itself.
func (c *child) interrupt() error {
	if c.exited() {
		return nil
	}
	return syscall.Kill(-c.pid, syscall.SIGINT)
}

// kill sends SIGKILL to run.sh's process group. Once run.sh has been
// reaped it does so once more only, at once (the group id is not reused
// while the group has members), never later: the id may have been reused.
func (c *child) kill() {
	if !c.reaped.Load() {
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	}
}

//go:build unix

package runner

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

// A Process is a running run.sh, in a process group of its own, whose
// output is copied to the Dir's Output, and read for what the runner's
// listener says of its jobs. Its methods are safe for concurrent use.
type Process struct {
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
	onJob   func(result string) // Dir.OnJob; nil: none
}

// maxLine is the longest output line parsed; longer ones are copied in
// pieces and not parsed.
const maxLine = 64 << 10

// outputGrace is how long run.sh's output is read after it exits: a job's
// process that left the group may hold the pipe open.
const outputGrace = time.Second

// Start starts the directory's run.sh.
func (d *Dir) Start() (*Process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(d.Path, "run.sh"))
	cmd.Dir = d.Path
	cmd.Env = childEnv(d.User)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = d.User.sysProcAttr()
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start run.sh: %w", err)
	}
	p := &Process{pid: cmd.Process.Pid, done: make(chan struct{}), changed: make(chan struct{}, 1), onJob: d.OnJob}
	read := make(chan struct{})
	out := d.output()
	go func() {
		defer close(read)
		p.copyOutput(r, out)
	}()
	go func() {
		err := cmd.Wait()
		p.status = exitStatus(cmd.ProcessState, err)
		// What run.sh left in its group (a job's background process that
		// ignores SIGINT, as bash makes them) goes with it: nothing of a
		// runner outlives its run.sh, across a restart or at the end.
		p.Kill()
		p.reaped.Store(true) // no SIGKILL to its group id after this one
		_ = r.SetReadDeadline(time.Now().Add(outputGrace))
		<-read
		r.Close()
		close(p.done)
	}()
	return p, nil
}

// exitStatus is the status of an exited process: its exit code, 128+N
// when signal N killed it, 1 when it could not be waited for.
func exitStatus(ps *os.ProcessState, err error) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// Pid is run.sh's process id, which is its process group's id too.
func (p *Process) Pid() int { return p.pid }

// Done is closed once run.sh has exited, its group was killed, and its
// output is read.
func (p *Process) Done() <-chan struct{} { return p.done }

// Status is run.sh's exit status (128+N for signal N), once Done is
// closed.
func (p *Process) Status() int {
	<-p.done
	return p.status
}

// Changed receives a value when the listener says it took a job or ended
// one; one value stands for any number of changes.
func (p *Process) Changed() <-chan struct{} { return p.changed }

// copyOutput copies run.sh's output line by line to out, and follows what
// the listener says of its jobs.
func (p *Process) copyOutput(r io.Reader, out io.Writer) {
	br := bufio.NewReaderSize(r, maxLine)
	long := false // inside a line longer than maxLine
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if !long {
				p.parse(line) // first: whoever reads the line sees its effect
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
func (p *Process) parse(line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	var result string
	p.mu.Lock()
	if m := completedLine.FindSubmatch(line); m != nil {
		result = string(m[2])
		if p.busy {
			if p.results == nil {
				p.results = map[int]string{}
			}
			p.results[p.started] = result
		}
		p.busy, p.job = false, ""
		p.ended++
	} else if m := runningLine.FindSubmatch(line); m != nil {
		p.busy, p.job = true, string(m[1])
		p.started++
	} else {
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	if p.onJob != nil {
		p.onJob(result)
	}
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// State returns whether the runner runs a job, which, and how many it
// has completed.
func (p *Process) State() (busy bool, job string, ended int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy, p.job, p.ended
}

// Result returns what the listener said of the n-th job's end (counting
// from 1): "Succeeded", "Canceled" and so on; "" while it has not said.
func (p *Process) Result(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.results[n]
}

// JobsStarted returns how many jobs the runner said it took.
func (p *Process) JobsStarted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Interrupt sends SIGINT to run.sh's process group, as Ctrl-C in its
// terminal would: run.sh does not pass signals on, the listener takes
// them itself, and hands its job back. Once run.sh has exited it does
// nothing.
func (p *Process) Interrupt() error {
	if p.exited() {
		return nil
	}
	return syscall.Kill(-p.pid, syscall.SIGINT)
}

// Kill sends SIGKILL to run.sh's process group. Once run.sh has been
// reaped it does nothing: its group was killed then, and the group id may
// have been reused since.
func (p *Process) Kill() {
	if !p.reaped.Load() {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
}

//go:build linux

package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A process is one job running as a child in its own process group, so
// that a signal reaches every process the job started.
type process struct {
	job  *Job
	cmd  *exec.Cmd
	out  *tail
	done chan Result // receives once, when the job has exited

	mu        sync.Mutex
	signalled string // the first signal the runner sent, if any
}

// start runs job.Command with sh -c in a new process group. The shell dies
// with the runner (Pdeathsig), and every process of the job carries the
// runner's name in its environment, so that the next runner of that name
// kills what the shell started (see killLeftovers): a runner killed with
// SIGKILL leaves no job behind to race the re-run of that job.
func start(job *Job, runnerName string) (*process, error) {
	cmd := exec.Command("/bin/sh", "-c", job.Command)
	cmd.Env = append(os.Environ(), jobEnv+"="+runnerName, jobRunnerEnv+"="+strconv.Itoa(os.Getpid()), "TERMSIG_JOB_ID="+job.ID)
	out := &tail{max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A process that leaves the group but keeps the output pipe open must
	// not keep Wait from returning once the job itself has exited.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{job: job, cmd: cmd, out: out, done: make(chan Result, 1)}
	go func() {
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode() // -1 if killed by a signal
		if err != nil && code == 0 && !errors.Is(err, exec.ErrWaitDelay) {
			code = -1
		}
		p.done <- Result{ExitCode: code, Output: out.String(), Status: cmd.ProcessState.String()}
	}()
	return p, nil
}

// signal sends sig to the job's process group.
func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	if p.signalled == "" {
		p.signalled = sig.String()
	}
	p.mu.Unlock()
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

// wasSignalled reports whether the runner signalled the job.
func (p *process) wasSignalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signalled != ""
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

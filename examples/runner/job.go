//go:build linux

package main

import (
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A process is one job: its shell, a child of the runner, in a process
// group of its own (see group), so that a signal reaches every process the
// job started and the whole group dies with the runner.
type process struct {
	job    *Job
	cmd    *exec.Cmd // the job's shell
	group  *group
	marker string      // the value of jobMarkEnv in the job's environment
	done   chan Result // receives once, when the shell has exited and the rest of the job is killed
	swept  []int       // processes that had left the group, killed by their marker; read after done
	dir    string      // the job's working directory, removed when it ends
}

// start runs job.Command with sh -c in a new process group, with the
// environment of jobEnvironment, as the user as (nil: the runner's). Every process of the job carries the
// runner's name and pid in its environment, so that the next runner of
// that name kills what its keeper could not (see killLeftovers), and a
// marker of its own, so that when the job ends the runner kills what left
// its process group (see killMarked).
//
// The shell gets no Pdeathsig: that fires when the thread that forked the
// shell exits, which in Go can happen while the runner lives on, and it
// reaches the shell only, not what the shell started. The group's keeper
// kills the whole group, and only when the runner's process ends.
func start(job *Job, runnerName string, allow []string, as *jobUser) (*process, error) {
	marker := rand.Text()
	env := jobEnvironment(allow, runnerName, job.ID, marker, as)
	// The keeper runs as the runner's user: a job of another user cannot
	// kill it, nor so escape the SIGKILL it sends when the runner dies.
	g, err := newGroup(env)
	if err != nil {
		return nil, err
	}
	// A directory of the job's own, not the runner's: the runner's state
	// file (its token) must not be one `cat *.json` away.
	dir, err := os.MkdirTemp("", "termsig-job-")
	if err == nil && as != nil {
		err = os.Chown(dir, as.uid, as.gid)
	}
	if err != nil {
		g.end()
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", job.Command)
	cmd.Env = env
	cmd.Dir = dir
	out := &tail{max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: g.id()}
	if as != nil {
		cmd.SysProcAttr.Credential = as.credential
	}
	// A process that leaves the group but keeps the output pipe open must
	// not keep Wait from returning once the job itself has exited.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		g.end()
		os.RemoveAll(dir)
		return nil, err
	}
	p := &process{job: job, cmd: cmd, group: g, marker: marker, dir: dir, done: make(chan Result, 1)}
	go p.wait(out)
	return p, nil
}

// jobEnvironment returns the environment of a job's processes: only the
// runner's variables named in allow (the runner's environment may hold
// secrets that a job could print), with HOME, USER and LOGNAME those of as
// if not nil, then CI=true, the job's id and the runner's markers.
func jobEnvironment(allow []string, runnerName, jobID, marker string, as *jobUser) []string {
	var env []string
	for _, name := range allow {
		if as != nil && (name == "HOME" || name == "USER" || name == "LOGNAME") {
			continue
		}
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	if as != nil {
		env = append(env, "HOME="+as.home, "USER="+as.name, "LOGNAME="+as.name)
	}
	return append(env,
		"CI=true",
		"TERMSIG_JOB_ID="+jobID,
		jobEnv+"="+runnerName,
		jobRunnerEnv+"="+strconv.Itoa(os.Getpid()),
		jobMarkEnv+"="+marker,
	)
}

// wait waits for the job's shell to exit, kills what the job left running
// in its group and what left the group, and sends how the shell ended on
// done.
func (p *process) wait(out *tail) {
	err := p.cmd.Wait()
	code := p.cmd.ProcessState.ExitCode() // -1 if killed by a signal
	if err != nil && code == 0 && !errors.Is(err, exec.ErrWaitDelay) {
		code = -1
	}
	res := Result{ExitCode: code, Output: out.String(), Status: p.cmd.ProcessState.String()}
	p.group.end()
	p.swept = killMarked(jobMarkEnv + "=" + p.marker)
	os.RemoveAll(p.dir) // its processes are gone: nothing writes there any more
	p.done <- res
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

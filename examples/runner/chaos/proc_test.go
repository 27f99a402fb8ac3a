//go:build linux

package chaos_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A line is one line of a process's output and when the harness read it:
// the process wrote it at that time or earlier.
type line struct {
	at   time.Time
	text string
}

// A proc is a registry or runner binary under test. Its output lines are
// kept, stamped with the time they were read, and can be waited for.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited and its output is read
	code   int           // exit status (-1: killed by a signal), once exited is closed

	mu      sync.Mutex
	lines   []line
	changed chan struct{} // closed and replaced at each new line
}

func startProc(bin string, env []string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	p := &proc{cmd: cmd, exited: make(chan struct{}), changed: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, line{time.Now(), sc.Text()})
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
		_ = cmd.Wait() // Wait closes the pipe: read it all first
		p.code = cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	return p, nil
}

// status describes how the process exited, once it has.
func (p *proc) status() string {
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "by " + unix.SignalName(ws.Signal())
	}
	return strconv.Itoa(p.code)
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) output() []line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]line(nil), p.lines...)
}

func (p *proc) text() string {
	var b strings.Builder
	for _, l := range p.output() {
		fmt.Fprintf(&b, "%s %s\n", l.at.Format("15:04:05.000"), l.text)
	}
	return b.String()
}

// waitLine waits up to timeout for a line that matches re, and fails if
// the process exits first.
func (p *proc) waitLine(re *regexp.Regexp, timeout time.Duration) (line, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		ch := p.changed
		for _, l := range p.lines {
			if re.MatchString(l.text) {
				p.mu.Unlock()
				return l, nil
			}
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-p.exited:
			// Lines are all read before exited is closed: one last look.
			for _, l := range p.output() {
				if re.MatchString(l.text) {
					return l, nil
				}
			}
			return line{}, fmt.Errorf("exited (%d) with no line matching %q", p.code, re)
		case <-deadline.C:
			return line{}, fmt.Errorf("no line matching %q within %v", re, timeout)
		}
	}
}

func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// waitExit waits up to timeout for the process to exit.
func (p *proc) waitExit(timeout time.Duration) (int, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.code, nil
	case <-t.C:
		return 0, fmt.Errorf("pid %d did not exit within %v", p.pid(), timeout)
	}
}

// signal sends sig unless the process has exited already (os.Process uses
// a pidfd: it never signals a process that reused the pid).
func (p *proc) signal(sig syscall.Signal) {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		panic(fmt.Sprintf("chaos: signal %v to pid %d: %v", sig, p.pid(), err))
	}
}

// kill ends the process for good and waits for it: for cleanup.
func (p *proc) kill() {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGKILL)
	<-p.exited
}

// marked returns the pids of the processes whose environment holds
// CHAOS_MARK=mark.
func marked(mark string) []int {
	want := []byte("\x00" + markEnv + "=" + mark + "\x00")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil {
			continue
		}
		if strings.Contains("\x00"+string(b), string(want)) && !zombie(dir) {
			pid, _ := strconv.Atoi(filepath.Base(dir))
			pids = append(pids, pid)
		}
	}
	return pids
}

func zombie(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return true
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) == 0 || f[0] == "Z"
}

//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// keeperScript is the leader of a job's process group: a shell that
// ignores the signals sent to stop a job (SIGTERM from the runner; SIGHUP,
// SIGINT and SIGTERM that a terminal or a service manager may send to the
// whole group), so that it outlives the job's own processes; says it is
// ready; reads its standard input, the lifeline, until end of file; and
// then kills its whole process group, itself included.
//
// Only the runner holds the other end of the lifeline (the runner's end
// is close-on-exec, so neither the job nor a re-executed runner inherits
// it), and the kernel closes it when the runner's process ends, however it
// ends: exit, panic, SIGKILL, the OOM killer. Unlike Pdeathsig, this does
// not depend on which thread started the keeper, and it cannot be missed
// by a runner that dies while the keeper starts.
const keeperScript = `trap '' HUP INT TERM; echo ready; read line; kill -s KILL 0`

// A group is the process group of one job. Its leader, and so its id, is
// the keeper (keeperScript), which the runner starts before the job's shell
// and reaps only after the group is gone: the id cannot name another
// process group while the runner may still signal it.
type group struct {
	keeper   *exec.Cmd
	lifeline *os.File // the runner's end: the keeper kills the group when it closes

	mu     sync.Mutex
	reaped bool // the keeper is reaped: the id may be another process's now
}

// newGroup starts the keeper of a new process group, with environment
// env, and waits until it is ready: until then, a signal to the group
// could kill it.
func newGroup(env []string) (*group, error) {
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		lifeR.Close()
		lifeW.Close()
		return nil, err
	}
	defer readyR.Close()
	keeper := exec.Command("/bin/sh", "-c", keeperScript)
	keeper.Env = env
	// Not the runner's directory: the keeper is dumpable, and a job of the
	// runner's user would find the state file in /proc/KEEPER/cwd.
	keeper.Dir = "/"
	keeper.Stdin, keeper.Stdout = lifeR, readyW
	keeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = keeper.Start()
	lifeR.Close() // the keeper's ends, passed on
	readyW.Close()
	if err != nil {
		lifeW.Close()
		return nil, fmt.Errorf("starting the job's keeper: %w", err)
	}
	g := &group{keeper: keeper, lifeline: lifeW}
	if err := awaitLine(readyR, "ready", 5*time.Second); err != nil {
		g.end()
		return nil, fmt.Errorf("the job's keeper: %w", err)
	}
	return g, nil
}

// awaitLine reads one line from f, and returns an error unless it is want.
func awaitLine(f *os.File, want string, timeout time.Duration) error {
	if err := f.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return fmt.Errorf("waiting for %q: %w", want, err)
	}
	if line != want+"\n" {
		return fmt.Errorf("said %q, not %q", line, want)
	}
	return nil
}

// id returns the process group id: the keeper's pid.
func (g *group) id() int { return g.keeper.Process.Pid }

// signal sends sig to every process of the group, the keeper included
// (which ignores SIGTERM, and dies of SIGKILL with the rest). Once the group
// has ended it does nothing.
func (g *group) signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reaped {
		return nil
	}
	err := syscall.Kill(-g.id(), sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

// end kills every process left in the group (what the job started in the
// background, and the keeper) and reaps the keeper.
func (g *group) end() {
	_ = g.signal(syscall.SIGKILL)
	g.mu.Lock()
	g.reaped = true
	g.mu.Unlock()
	g.lifeline.Close()
	_ = g.keeper.Wait()
}

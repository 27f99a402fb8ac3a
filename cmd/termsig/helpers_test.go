//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// wait bounds every wait for something that should happen at once; a pass
// takes far less.
const wait = 10 * time.Second

// termsigBin is the termsig binary that TestMain builds.
var termsigBin string

// childEnv makes the test binary act as the supervised command (see
// childMain) instead of running the tests.
const childEnv = "TERMSIG_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	dir, err := os.MkdirTemp("", "termsig-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	termsigBin = filepath.Join(dir, "termsig")
	out, err := exec.Command("go", "build", "-o", termsigBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building termsig: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// childMain is a command for termsig to supervise that reports on the FIFO
// named by TERMSIG_TEST_LOG every signal it receives, and when: "ready PID",
// "signal NAME", "grandchild PID". TERMSIG_TEST_EXIT=N makes it exit with N
// at once; TERMSIG_TEST_ON_TERM says what SIGTERM does: "exit" (exit 0, the
// default), "ignore", or "die" (death by SIGTERM). TERMSIG_TEST_EXIT_ON=NAME
// makes signal NAME (SIGUSR1) end it too: it says "exiting", then exits 0.
// TERMSIG_TEST_GRANDCHILD=1 makes it start a "sleep 1000" first, in its
// process group.
func childMain() int {
	logf, err := os.OpenFile(os.Getenv("TERMSIG_TEST_LOG"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 99
	}
	say := func(format string, a ...any) { fmt.Fprintf(logf, format+"\n", a...) }
	if code := os.Getenv("TERMSIG_TEST_EXIT"); code != "" {
		n, _ := strconv.Atoi(code)
		return n
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	if os.Getenv("TERMSIG_TEST_GRANDCHILD") != "" {
		gc := exec.Command("sleep", "1000")
		if err := gc.Start(); err != nil {
			return 98
		}
		say("grandchild %d", gc.Process.Pid)
	}
	say("notify-socket %q", os.Getenv("NOTIFY_SOCKET"))
	say("ready %d", os.Getpid())
	for sig := range sigs {
		name := unix.SignalName(sig.(syscall.Signal))
		say("at %s %d", name, time.Now().UnixNano())
		say("signal %s", name)
		if name == os.Getenv("TERMSIG_TEST_EXIT_ON") {
			say("exiting")
			return 0
		}
		if sig != syscall.SIGTERM {
			continue
		}
		switch os.Getenv("TERMSIG_TEST_ON_TERM") {
		case "ignore":
		case "die":
			signal.Reset(syscall.SIGTERM)
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
			select {}
		default:
			return 0
		}
	}
	return 0
}

// A run is one termsig process and what its child reports.
type run struct {
	t      testing.TB
	cmd    *exec.Cmd
	stderr *syncBuffer
	stdout *syncBuffer
	lines  chan string // from the child's FIFO
	exited chan struct{}
	status int
	// childPid is the supervised command's pid, once it said "ready".
	childPid int
}

// start runs termsig with args; env adds to the environment (of termsig and
// so of its child). The child, if any, is this test binary (see child).
func start(t testing.TB, env []string, args ...string) *run {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "child.log")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	// Read and write, so that the open does not wait for a writer and a
	// child that exits does not end the reads.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	require.NoError(t, err)
	r := &run{t: t, stderr: &syncBuffer{}, stdout: &syncBuffer{}, lines: make(chan string, 64), exited: make(chan struct{})}
	r.cmd = exec.Command(termsigBin, args...)
	r.cmd.Env = append(append(os.Environ(), "TERMSIG_TEST_LOG="+fifo), env...)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	// A command that outlives a failed test must not hold termsig's output
	// open for ever.
	r.cmd.WaitDelay = time.Second
	require.NoError(t, r.cmd.Start())
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	go func() {
		_ = r.cmd.Wait()
		r.status = exitStatus(r.cmd.ProcessState)
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.exited
		if pid := r.childPid; pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // the command's group
		}
		f.Close()
		if t.Failed() {
			t.Logf("termsig's stderr:\n%s", r.stderr.String())
		}
	})
	return r
}

// child is the command line that makes termsig supervise this test binary
// as childMain.
func child() []string {
	exe, _ := os.Executable()
	return []string{"--", exe}
}

// expect waits for the child to report a line starting with prefix, and
// returns the rest of it.
func (r *run) expect(prefix string) string {
	r.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case l := <-r.lines:
			if rest, ok := strings.CutPrefix(l, "ready "); ok {
				r.childPid, _ = strconv.Atoi(rest)
			}
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return strings.TrimSpace(rest)
			}
		case <-timeout:
			r.t.Fatalf("the child never reported %q", prefix)
		}
	}
}

// wait waits for termsig to exit and returns its status.
func (r *run) wait() int {
	r.t.Helper()
	select {
	case <-r.exited:
		return r.status
	case <-time.After(wait):
		r.t.Fatal("termsig did not exit")
	}
	return -1
}

func (r *run) signal(sig syscall.Signal) {
	r.t.Helper()
	require.NoError(r.t, r.cmd.Process.Signal(sig))
}

// gone waits until process pid has ended, through a pidfd: no polling.
func gone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return
	}
	require.NoError(t, err)
	defer unix.Close(fd)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for ctx.Err() == nil {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(within.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		require.NoError(t, err)
		if n == 1 {
			return
		}
		break
	}
	t.Fatalf("process %d still runs after %v", pid, within)
}

type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced by each Write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

// next returns a channel that the next Write closes.
func (s *syncBuffer) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitLog waits until termsig's log has a line containing want (and, if
// also is not empty, that too).
func waitLog(t *testing.T, r *run, want, also string) {
	t.Helper()
	deadline := time.After(wait)
	for {
		changed := r.stderr.next()
		for _, l := range strings.Split(r.stderr.String(), "\n") {
			if strings.Contains(l, want) && strings.Contains(l, also) {
				return
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("termsig never logged %q; its log:\n%s", want, r.stderr.String())
		}
	}
}

//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
	"github.com/termsig/termsig/imds/imdstest"
)

// wait bounds every wait for something that should happen at once; a pass
// takes far less.
const wait = 20 * time.Second

// testToken is the API token the fake GitHub accepts.
const testToken = "ghp_termsigTESTtoken0000000000000000"

// ghrunnerBin is the ghrunner binary that TestMain builds.
var ghrunnerBin string

func TestMain(m *testing.M) {
	if role := os.Getenv(ghfake.RoleEnv); role != "" {
		// This process is the fake runner's config.sh or listener.
		os.Exit(ghfake.Main(role, os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "ghrunner-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ghrunnerBin = filepath.Join(dir, "ghrunner")
	if out, err := exec.Command("go", "build", "-race", "-o", ghrunnerBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building ghrunner: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// A world is a fake GitHub, a fake IMDS and a fake runner directory.
type world struct {
	t   testing.TB
	gh  *ghfake.Server
	md  *imdstest.Server
	dir string
}

func newWorld(t testing.TB, latency time.Duration) *world {
	t.Helper()
	gh, err := ghfake.Start(ghfake.Config{Token: testToken, Latency: latency})
	require.NoError(t, err)
	t.Cleanup(gh.Close)
	md := imdstest.NewServer()
	t.Cleanup(md.Close)
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, ghfake.WriteRunnerDir(dir, exe))
	return &world{t: t, gh: gh, md: md, dir: dir}
}

// defaultArgs are ghrunner's flags in the tests: short intervals.
func (w *world) defaultArgs() []string {
	return []string{
		"-repo", "acme/app", "-url", w.gh.APIURL(), "-runner-dir", w.dir, "-name", "spot-1",
		"-sources", "imds", "-imds-interval", "20ms", "-poll", "20ms", "-margin", "1s",
		"-log-format", "json",
	}
}

// A proc is one ghrunner process.
type proc struct {
	t       testing.TB
	cmd     *exec.Cmd
	stderr  *logBuffer
	stdout  *logBuffer
	done    chan struct{}
	status  int
	started time.Time
}

// start runs ghrunner with the default flags and extra ones (later ones
// win).
func (w *world) start(extra ...string) *proc {
	w.t.Helper()
	cmd := exec.Command(ghrunnerBin, append(w.defaultArgs(), extra...)...)
	cmd.Env = append(os.Environ(), tokenEnv+"="+testToken, "AWS_EC2_METADATA_SERVICE_ENDPOINT="+w.md.URL, allowRootEnv+"=1")
	p := &proc{t: w.t, cmd: cmd, stderr: newLogBuffer(), stdout: newLogBuffer(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	require.NoError(w.t, cmd.Start())
	p.started = time.Now()
	go func() {
		_ = cmd.Wait()
		p.status = exitStatus(cmd.ProcessState, nil)
		close(p.done)
	}()
	w.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		for _, pid := range p.runShPids() {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		if w.t.Failed() || os.Getenv("GHRUNNER_TEST_LOG") != "" {
			w.t.Logf("ghrunner's stderr:\n%s\nstdout:\n%s", p.stderr, p.stdout)
		}
	})
	return p
}

// signal sends sig to ghrunner.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig))
}

// exit waits for ghrunner to exit and returns its status.
func (p *proc) exit() int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.status
	case <-time.After(wait):
		p.t.Fatalf("ghrunner has not exited after %v", wait)
		return -1
	}
}

// logLine waits for a log record whose msg contains msg and returns it.
func (p *proc) logLine(msg string) map[string]any {
	p.t.Helper()
	var rec map[string]any
	p.stderr.await(p.t, func(line string) bool {
		rec = nil
		if json.Unmarshal([]byte(line), &rec) != nil {
			return false
		}
		m, _ := rec["msg"].(string)
		return strings.Contains(m, msg)
	})
	return rec
}

// records returns the log records whose msg contains msg.
func (p *proc) records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range p.stderr.lines() {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && strings.Contains(fmt.Sprint(rec["msg"]), msg) {
			out = append(out, rec)
		}
	}
	return out
}

// runShPids are the pids of every run.sh ghrunner logged it started.
func (p *proc) runShPids() []int {
	var pids []int
	for _, rec := range p.records("run.sh started") {
		if pid, ok := rec["pid"].(float64); ok {
			pids = append(pids, int(pid))
		}
	}
	return pids
}

// groupGone reports whether no live process is left in process group
// pgid. Where /proc tells, a zombie (dead, not yet reaped by whatever
// adopted it) does not count.
func groupGone(pgid int) bool {
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return true
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		_, rest, _ := strings.Cut(string(b), ") ")
		fields := strings.Fields(rest)
		if len(fields) > 2 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" {
			return false
		}
	}
	return true
}

// await waits on the fake GitHub until cond holds.
func (w *world) await(what string, cond func() bool) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := w.gh.Await(ctx, cond); err != nil {
		w.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// onlineRunner waits for a runner named name to be online and returns it.
func (w *world) onlineRunner(name string) ghfake.Runner {
	w.t.Helper()
	var found ghfake.Runner
	w.await("runner "+name+" online", func() bool {
		for _, r := range w.gh.Runners() {
			if r.Name == name && r.Online {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// runningOn waits for run's job to run on runner id.
func (w *world) runningOn(run, id int64) {
	w.t.Helper()
	w.await(fmt.Sprintf("run %d's job on runner %d", run, id), func() bool {
		r, ok := w.gh.Run(run)
		if !ok {
			return false
		}
		for _, j := range r.Jobs {
			if j.RunnerID == id && j.Status == "in_progress" {
				return true
			}
		}
		return false
	})
}

// calls returns the API calls with method whose path ends with suffix.
func (w *world) calls(method, suffix string) []ghfake.Call {
	var out []ghfake.Call
	for _, c := range w.gh.Calls() {
		if c.Method == method && strings.HasSuffix(c.Path, suffix) {
			out = append(out, c)
		}
	}
	return out
}

// answered returns the calls that calls returns which were answered with
// success.
func (w *world) answered(method, suffix string) []ghfake.Call {
	var out []ghfake.Call
	for _, c := range w.calls(method, suffix) {
		if c.Status >= 200 && c.Status < 300 {
			out = append(out, c)
		}
	}
	return out
}

// A logBuffer keeps what a process writes, and lets a test wait for a
// line without sleeping.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogBuffer() *logBuffer { return &logBuffer{changed: make(chan struct{})} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) lines() []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// await waits for a line that match accepts.
func (b *logBuffer) await(t testing.TB, match func(string) bool) {
	t.Helper()
	timeout := time.After(wait)
	for {
		b.mu.Lock()
		changed := b.changed
		b.mu.Unlock()
		for _, line := range b.lines() {
			if match(line) {
				return
			}
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no such line after %v in:\n%s", wait, b)
		}
	}
}

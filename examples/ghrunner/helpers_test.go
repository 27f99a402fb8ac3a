//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
	"github.com/termsig/termsig/examples/ghrunner/internal/supervisor"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/ops"
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
	// opsConfig, if set, changes the ops config of startHere's
	// supervisor, from its flags: its clock, its staleness.
	opsConfig func(*ops.Config)
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
	srv     *ops.Server // startHere's; nil for a process
}

// start runs ghrunner with the default flags and extra ones (later ones
// win).
func (w *world) start(extra ...string) *proc {
	w.t.Helper()
	return w.startBin(ghrunnerBin, extra...)
}

// startBin is start with another build of ghrunner.
func (w *world) startBin(bin string, extra ...string) *proc {
	w.t.Helper()
	cmd := exec.Command(bin, append(w.defaultArgs(), extra...)...)
	cmd.Env = append(os.Environ(), tokenEnv+"="+testToken, "AWS_EC2_METADATA_SERVICE_ENDPOINT="+w.md.URL, allowRootEnv+"=1")
	p := &proc{t: w.t, cmd: cmd, stderr: newLogBuffer(), stdout: newLogBuffer(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	require.NoError(w.t, cmd.Start())
	p.started = time.Now()
	go func() {
		_ = cmd.Wait()
		p.status = cmd.ProcessState.ExitCode()
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

// startWithJob starts ghrunner, waits for its runner to be online and for
// a job that runs until cancelled to run on it.
func (w *world) startWithJob(extra ...string) (*proc, ghfake.Runner, int64) {
	w.t.Helper()
	p := w.start(extra...)
	r := w.onlineRunner("spot-1")
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "build"}}})
	w.runningOn(run, r.ID)
	p.stdout.await(w.t, func(line string) bool { return contains(line, "Running job: build") })
	return p, r, run
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// checkCleanedUp checks the end of a cleanup after a job was interrupted:
// the run cancelled and re-run once, the registration removed, run.sh's
// process group gone, exit 0.
func (w *world) checkCleanedUp(p *proc, r ghfake.Runner, run int64) {
	w.t.Helper()
	require.Equal(w.t, supervisor.ExitOK, p.exit(), "exit status")
	got, ok := w.gh.Run(run)
	require.True(w.t, ok)
	assert.True(w.t, got.CancelRequested, "run cancelled")
	assert.Equal(w.t, []string{"failed"}, got.Reruns, "re-run once, its failed jobs")
	assert.EqualValues(w.t, 2, got.Attempt, "a new attempt")
	_, still := w.gh.Runner(r.ID)
	assert.False(w.t, still, "registration removed")
	for _, pid := range p.runShPids() {
		assert.True(w.t, groupGone(pid), "run.sh's process group %d is gone", pid)
	}
	runPath := "/runs/" + itoa(run)
	cancel, rerun, del := w.answered("POST", runPath+"/cancel"), w.answered("POST", runPath+"/rerun-failed-jobs"), w.answered("DELETE", "/actions/runners/"+itoa(r.ID))
	require.Len(w.t, cancel, 1)
	require.Len(w.t, rerun, 1)
	require.NotEmpty(w.t, del)
	assert.True(w.t, cancel[0].At.Before(rerun[0].At), "cancel, then re-run")
	assert.True(w.t, cancel[0].At.Before(del[len(del)-1].At), "cancel, then unregister")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// startWithUnknownJob is startWithJob with the job's lookup at its start
// failing: f is injected first.
func (w *world) startWithUnknownJob(f ghfake.Fault) (*proc, ghfake.Runner, int64) {
	w.t.Helper()
	p := w.start()
	r := w.onlineRunner("spot-1")
	w.gh.Inject(f)
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "build"}}})
	w.runningOn(run, r.ID)
	p.logLine("cannot look up the job")
	return p, r, run
}

// stepRecord returns the first "step ..." log record whose step starts
// with prefix.
func stepRecord(p *proc, prefix string) map[string]any {
	for _, msg := range []string{"step failed", "step done"} {
		for _, rec := range p.records(msg) {
			if s, _ := rec["step"].(string); strings.HasPrefix(s, prefix) {
				return rec
			}
		}
	}
	return nil
}

// githubClient is a client of the fake GitHub, as a person would use.
func githubClient(w *world) *github.Client {
	c := github.NewClient(nil).WithAuthToken(testToken)
	u, err := c.BaseURL.Parse(w.gh.APIURL())
	require.NoError(w.t, err)
	c.BaseURL = u
	return c
}

// requireAccepted accepts go-github's AcceptedError for a 202.
func requireAccepted(t *testing.T, err error) {
	t.Helper()
	var accepted *github.AcceptedError
	if err != nil && !errors.As(err, &accepted) {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o755))
}

// lingeringRunSh wraps run.sh so that it starts a background process, as
// a job's "daemon &" does: a non-interactive bash's background process
// ignores SIGINT. Its pid is printed as "LINGER PID".
func lingeringRunSh(t *testing.T, w *world) {
	t.Helper()
	real := filepath.Join(w.dir, "run-real.sh")
	require.NoError(t, os.Rename(filepath.Join(w.dir, "run.sh"), real))
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, "run.sh"), []byte(
		"#!/bin/bash\nsleep 300 </dev/null >/dev/null 2>&1 &\necho \"LINGER $!\"\nexec \""+real+"\" \"$@\"\n"), 0o755))
}

var lingerLine = regexp.MustCompile(`LINGER (\d+)`)

func lingerPids(p *proc) []int {
	var pids []int
	for _, m := range lingerLine.FindAllStringSubmatch(p.stdout.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		pids = append(pids, n)
	}
	return pids
}

// lateJobWorld starts ghrunner, sends SIGTERM while the first API call of
// the cleanup hangs, and meanwhile lets run.sh take a 1 ms job that ends by
// itself (failed or not) before run.sh is stopped.
func lateJobWorld(t *testing.T, fail bool) (*world, *proc, int64) {
	w := newWorld(t, 0)
	p := w.start("-api-timeout", "3s")
	r := w.onlineRunner("spot-1")
	p.stdout.await(t, func(line string) bool { return contains(line, "Listening for Jobs") })
	w.gh.Inject(ghfake.Fault{Method: "GET", Path: "/actions/runners/", Times: 1, Hang: true})
	p.signal(syscall.SIGTERM)
	w.await("find's first call", func() bool { return len(w.calls("GET", "/actions/runners/"+itoa(r.ID))) > 0 })
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "quick", Duration: time.Millisecond, Fail: fail}}})
	w.await("the job done by itself", func() bool { got, _ := w.gh.Run(run); return got.Status == "completed" })
	p.stdout.await(t, func(line string) bool { return contains(line, "Job quick completed with result") })
	return w, p, run
}

// knownJobEndsBeforeTheCancel starts a job that ends by itself (failed or
// not) 1.5 s after it started, lets it be looked up, and sends SIGTERM
// while the cancel of its run hangs until the job has ended.
func knownJobEndsBeforeTheCancel(t *testing.T, fail bool) (*world, *proc, int64) {
	w := newWorld(t, 0)
	p := w.start("-api-timeout", "4s")
	r := w.onlineRunner("spot-1")
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "quick", Duration: 1500 * time.Millisecond, Fail: fail}}})
	w.runningOn(run, r.ID)
	p.logLine("the runner runs")
	w.gh.Inject(ghfake.Fault{Method: "POST", Path: "/cancel", Times: 1, Hang: true})
	p.signal(syscall.SIGTERM)
	w.await("the cancel sent", func() bool { return len(w.calls("POST", "/cancel")) > 0 })
	p.stdout.await(t, func(line string) bool { return contains(line, "Job quick completed with result") })
	w.await("the job done by itself", func() bool { got, _ := w.gh.Run(run); return got.Status == "completed" })
	return w, p, run
}

// slowRunningLineRunSh wraps run.sh so that its "Running job: NAME" line
// reaches ghrunner secs seconds after the listener printed it (a busy
// machine, a full pipe): the listener runs the job meanwhile. The reader
// ignores SIGINT, as a pipe's reader would not be part of the stop. The
// channel it returns is closed once the listener has printed the line: it
// is then in the job, whatever GitHub shows.
func slowRunningLineRunSh(t *testing.T, w *world, name string, secs int) <-chan struct{} {
	t.Helper()
	real := filepath.Join(w.dir, "run-real.sh")
	require.NoError(t, os.Rename(filepath.Join(w.dir, "run.sh"), real))
	fifo := filepath.Join(w.dir, "running.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	// Read and write, so that neither the open here nor the script's waits
	// for the other side.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, "run.sh"), []byte(
		"#!/bin/bash\n\""+real+"\" \"$@\" 2>&1 | { trap '' INT; while IFS= read -r l; do "+
			"case \"$l\" in *\"Running job: "+name+"\"*) echo >\""+fifo+"\"; sleep "+strconv.Itoa(secs)+";; esac; printf '%s\\n' \"$l\"; done; }\n"), 0o755))
	running := make(chan struct{})
	go func() {
		if _, err := f.Read(make([]byte, 1)); err == nil {
			close(running)
		}
	}()
	return running
}

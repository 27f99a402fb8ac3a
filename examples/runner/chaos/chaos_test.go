//go:build linux

package chaos_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/termsig/termsig/examples/registry"
	"github.com/termsig/termsig/imds/imdstest"
)

var (
	flagN        = flag.Int("chaos.n", 20, "number of schedules: seeds 1..n")
	flagSeed     = flag.Uint64("chaos.seed", 0, "run the schedule of this seed alone")
	flagParallel = flag.Int("chaos.parallel", 4, "schedules run at once")
	flagVerbose  = flag.Bool("chaos.v", false, "log each schedule's faults")
	flagHang     = flag.Bool("chaos.runner-hang", false, "also hang runners (SIGSTOP, then SIGCONT) for up to twice the lease: their jobs run on, re-queued elsewhere (a known limit of leases, off by default)")
)

// The binaries under test, built once by TestMain.
var runnerBin, registryBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		panic(err)
	}
	runnerBin = filepath.Join(dir, "runner")
	registryBin = filepath.Join(dir, "registry")
	for bin, pkg := range map[string]string{runnerBin: "..", registryBin: "../../registry/cmd/registry"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	goleak.VerifyTestMain(removing{m, dir})
}

// removing runs the tests, then removes dir: goleak.VerifyTestMain ends
// with os.Exit, so a deferred RemoveAll in TestMain would never run.
type removing struct {
	m   *testing.M
	dir string
}

func (r removing) Run() int {
	defer os.RemoveAll(r.dir)
	return r.m.Run()
}

// The settings of every schedule: short enough that a schedule takes
// seconds, long enough that a loaded CI machine keeps to them.
const (
	hosts         = 2                       // runners at once
	lease         = 2 * time.Second         // the registry's -lease
	stopTimeout   = 4 * time.Second         // the runner's -stop-timeout: a signal's deadline
	margin        = time.Second             // the runner's -margin
	grace         = 1500 * time.Millisecond // the runner's -grace
	finishWithin  = 90 * time.Second        // every job done after the faults stop
	exitWithin    = 20 * time.Second        // a runner told to stop has exited
	markEnv       = "CHAOS_MARK"            // in the environment of every job process of a schedule
	adminToken    = "chaos-admin-token"
	joinToken     = "chaos-join-token"
	lateTolerance = 5 * time.Millisecond // the timeline's rounding
)

// Counts are what the schedules found. The last seven must be zero.
type counts struct {
	schedules, jobs, completed, requeued int
	rerunsAfterKill                      int // a completed job run again: its runner was SIGKILLed (or the job, by the drain) between its end and the report
	lost, concurrent, afterNotice        int
	stale, leftover, lateDrains          int
	unstopped                            int // runners still running 20 s after SIGTERM
	duplicates                           int // a completed job run again with no SIGKILL to explain it
}

func (c *counts) add(o counts) {
	c.schedules += o.schedules
	c.jobs += o.jobs
	c.completed += o.completed
	c.requeued += o.requeued
	c.rerunsAfterKill += o.rerunsAfterKill
	c.lost += o.lost
	c.concurrent += o.concurrent
	c.afterNotice += o.afterNotice
	c.stale += o.stale
	c.leftover += o.leftover
	c.lateDrains += o.lateDrains
	c.unstopped += o.unstopped
	c.duplicates += o.duplicates
}

func (c counts) bad() int {
	return c.lost + c.concurrent + c.afterNotice + c.stale + c.leftover + c.lateDrains + c.duplicates + c.unstopped
}

func (c counts) String() string {
	return fmt.Sprintf("schedules %d, jobs %d, completed %d, re-queued %d, lost %d, concurrent duplicates %d, starts after notice %d, stale registrations %d, leftover processes %d, late drains %d, runners that ignored SIGTERM %d, re-runs after a SIGKILL between end and report %d, other re-runs of completed jobs %d",
		c.schedules, c.jobs, c.completed, c.requeued, c.lost, c.concurrent, c.afterNotice, c.stale, c.leftover, c.lateDrains, c.unstopped, c.rerunsAfterKill, c.duplicates)
}

func TestChaos(t *testing.T) {
	seeds := make([]uint64, 0, *flagN)
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		for i := range *flagN {
			seeds = append(seeds, uint64(i+1))
		}
	}
	type outcome struct {
		seed uint64
		c    counts
		errs []string
		log  string
	}
	results := make([]outcome, len(seeds))
	ports := &portSet{used: map[string]bool{}}
	sem := make(chan struct{}, max(*flagParallel, 1))
	var wg sync.WaitGroup
	start := time.Now()
	for i, seed := range seeds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := newSchedule(seed, ports)
			c, errs := s.run()
			failed := len(errs) > 0 || c.bad() > 0
			results[i] = outcome{seed, c, errs, s.report(failed || *flagVerbose)}
			if !failed {
				os.RemoveAll(s.dir)
			}
		}()
	}
	wg.Wait()

	var total counts
	var failed []uint64
	for _, r := range results {
		total.add(r.c)
		if len(r.errs) > 0 || r.c.bad() > 0 {
			failed = append(failed, r.seed)
			t.Errorf("seed %d: %s\n  %s\n%s", r.seed, r.c, strings.Join(r.errs, "\n  "), r.log)
		} else if *flagVerbose {
			t.Logf("seed %d: %s\n%s", r.seed, r.c, r.log)
		}
	}
	t.Logf("%s (%v)", total, time.Since(start).Round(time.Second))
	for _, seed := range failed {
		t.Logf("re-run alone: go test ./examples/runner/chaos -run Chaos -v -chaos.v -chaos.seed %d", seed)
	}
}

// A schedule is one seeded run: a registry, a fake IMDS per host, the
// runners on those hosts, jobs, and faults at random moments.
type schedule struct {
	seed  uint64
	ports *portSet
	rng   *rand.Rand // the faults, their moments, the jobs
	rngR  *rand.Rand // how a runner is replaced: drawn when one exits, so in an order that timing decides
	dir   string
	mark  string
	addr  string
	admin *registry.Client

	reg     *proc
	regs    []*proc // every registry process, for the report
	hosts   []*host
	runners []*runnerRec // every runner process, in start order
	jobs    []string
	events  []string // what the harness did, when
	// unstopped are the runners still running exitWithin after the
	// final SIGTERM: they lost it.
	unstopped []*runnerRec
	start     time.Time
}

type host struct {
	i        int
	imds     *imdstest.Server
	cur      *runnerRec
	gen      int
	notified bool // a spot interruption is set
}

type runnerRec struct {
	p        *proc
	name     string
	state    string
	killedAt time.Time // when the harness sent SIGKILL
}

// A portSet holds the registries' ports, so that no schedule picks one
// that another's registry, down for a while, means to listen on again.
type portSet struct {
	mu   sync.Mutex
	used map[string]bool
}

// take reserves addr, and reports whether it was free.
func (p *portSet) take(addr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used[addr] {
		return false
	}
	p.used[addr] = true
	return true
}

func newSchedule(seed uint64, ports *portSet) *schedule {
	dir, err := os.MkdirTemp("", fmt.Sprintf("chaos-%d-", seed))
	if err != nil {
		panic(err)
	}
	return &schedule{
		seed:  seed,
		ports: ports,
		rng:   rand.New(rand.NewPCG(seed, 1)),
		rngR:  rand.New(rand.NewPCG(seed, 2)),
		dir:   dir,
		mark:  fmt.Sprintf("%d-%d-%d", os.Getpid(), seed, time.Now().UnixNano()),
	}
}

func (s *schedule) logf(format string, args ...any) {
	s.events = append(s.events, fmt.Sprintf("%8.3fs %s", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...)))
}

// run runs the schedule, cleans up, and returns what the checks found, and
// what kept the harness from finishing it.
func (s *schedule) run() (c counts, errs []string) {
	s.start = time.Now()
	defer s.cleanup()
	err := s.play()
	c, problems := s.check(err == nil)
	if err != nil {
		problems = append([]string{"harness: " + err.Error()}, problems...)
	}
	return c, problems
}

func (s *schedule) cleanup() {
	for _, r := range s.runners {
		r.p.kill()
	}
	for _, p := range s.regs {
		p.kill()
	}
	for _, h := range s.hosts {
		h.imds.Close()
	}
	for _, pid := range marked(s.mark) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// play starts the world, injects the faults, then lets every job finish
// and stops every runner.
func (s *schedule) play() error {
	if err := os.Mkdir(filepath.Join(s.dir, "locks"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "admin-token"), []byte(adminToken), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "join-token"), []byte(joinToken), 0o600); err != nil {
		return err
	}
	if err := s.startRegistry(true); err != nil {
		return err
	}
	for i := range hosts {
		h := &host{i: i, imds: imdstest.NewServer()}
		s.hosts = append(s.hosts, h)
	}
	for range 3 + s.rng.IntN(4) {
		if err := s.enqueue(); err != nil {
			return err
		}
	}
	for _, h := range s.hosts {
		if err := s.startRunner(h, false); err != nil {
			return err
		}
	}

	for range 6 + s.rng.IntN(8) {
		pause(time.Duration(20+s.rng.IntN(800)) * time.Millisecond)
		if err := s.reap(); err != nil {
			return err
		}
		if err := s.fault(); err != nil {
			return err
		}
	}
	return s.finish()
}

// pause waits for no event: a random delay between faults (the point of a
// chaos test), or the interval of a poll that has a deadline (the registry
// has no way to say that a lease lapsed or a job finished).
func pause(d time.Duration) { time.Sleep(d) }

// fault injects one fault, drawn from s.rng.
func (s *schedule) fault() error {
	h := s.hosts[s.rng.IntN(len(s.hosts))]
	r := h.cur
	if *flagHang && s.rng.IntN(8) == 0 {
		d := time.Duration(300+s.rng.IntN(int(2*lease/time.Millisecond))) * time.Millisecond
		s.logf("runner %s pid %d hung (SIGSTOP) for %v", r.name, r.p.pid(), d)
		r.p.signal(syscall.SIGSTOP)
		pause(d)
		r.p.signal(syscall.SIGCONT)
		return nil
	}
	switch n := s.rng.IntN(100); {
	case n < 14:
		if h.notified {
			return nil
		}
		at := time.Now().Add(time.Duration(3000+s.rng.IntN(2000)) * time.Millisecond)
		h.imds.SetInterruption("terminate", at)
		h.notified = true
		s.logf("host %d: spot interruption, deadline in %v (runner %s pid %d)", h.i, time.Until(at).Round(time.Millisecond), r.name, r.p.pid())
	case n < 26:
		s.logf("SIGTERM runner %s pid %d", r.name, r.p.pid())
		r.p.signal(syscall.SIGTERM)
	case n < 38:
		s.logf("SIGKILL runner %s pid %d", r.name, r.p.pid())
		r.killedAt = time.Now()
		r.p.signal(syscall.SIGKILL)
	case n < 46:
		s.logf("SIGHUP runner %s pid %d", r.name, r.p.pid())
		r.p.signal(syscall.SIGHUP)
	case n < 52:
		d := time.Duration(s.rng.IntN(60)) * time.Millisecond
		s.logf("SIGHUP twice, %v apart, runner %s pid %d", d, r.name, r.p.pid())
		r.p.signal(syscall.SIGHUP)
		pause(d)
		r.p.signal(syscall.SIGHUP)
	case n < 59:
		s.logf("registry restart (SIGTERM)")
		return s.restartRegistry(syscall.SIGTERM, 0)
	case n < 66:
		s.logf("registry crash (SIGKILL), restart from its state file")
		return s.restartRegistry(syscall.SIGKILL, 0)
	case n < 73:
		d := time.Duration(300+s.rng.IntN(2500)) * time.Millisecond
		s.logf("registry outage of %v", d)
		return s.restartRegistry(syscall.SIGKILL, d)
	case n < 80:
		d := time.Duration(300+s.rng.IntN(2500)) * time.Millisecond
		s.logf("registry hang (SIGSTOP) for %v", d)
		s.reg.signal(syscall.SIGSTOP)
		pause(d)
		s.reg.signal(syscall.SIGCONT)
		s.logf("registry SIGCONT")
	default:
		return s.enqueue()
	}
	return nil
}

// jobCommand is a job that records its runs in runs.log, the checks'
// ground truth: a start line, an end line when it completes, and a dup
// line if another run of the same job still holds its lock (flock: the
// kernel releases it when the last process of that run, background ones
// included, is gone). Some jobs ignore SIGTERM, some leave a process in
// the background.
func (s *schedule) jobCommand() string {
	log := filepath.Join(s.dir, "runs.log")
	rec := func(what string) string {
		return fmt.Sprintf(`echo "%s $TERMSIG_JOB_ID $TERMSIG_RUNNER_JOB $TERMSIG_RUNNER_PID $$ $(date +%%s%%N)" >> %s`, what, log)
	}
	cmd := []string{
		fmt.Sprintf("exec 9>> %s/locks/$TERMSIG_JOB_ID", s.dir),
		"flock -n 9 || " + rec("dup"),
		rec("start"),
	}
	kind := s.rng.IntN(4)
	if kind&1 != 0 {
		cmd = append(cmd, "trap '' TERM")
	}
	if kind&2 != 0 {
		cmd = append(cmd, "(trap '' TERM; sleep 120) &")
	}
	cmd = append(cmd, fmt.Sprintf("sleep %.3f", float64(100+s.rng.IntN(1400))/1000), "trap '' TERM", rec("end"))
	return strings.Join(cmd, "\n")
}

func (s *schedule) enqueue() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, err := s.admin.Enqueue(ctx, s.jobCommand())
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	s.jobs = append(s.jobs, j.ID)
	s.logf("enqueued %s", j.ID)
	return nil
}

var listening = regexp.MustCompile(`^registry: listening on `)

// startRegistry starts the registry on s.addr; the first time, on a free
// port below the ephemeral range, so that no connection of another
// schedule takes it while the registry is down.
func (s *schedule) startRegistry(first bool) error {
	for try := 0; ; try++ {
		if first {
			addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
			if !s.ports.take(addr) {
				continue
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				continue
			}
			s.addr = ln.Addr().String()
			ln.Close()
		}
		p, err := startProc(registryBin, os.Environ(), "-listen", s.addr, "-state", filepath.Join(s.dir, "registry.json"),
			"-admin-token-file", filepath.Join(s.dir, "admin-token"), "-join-token-file", filepath.Join(s.dir, "join-token"), "-lease", lease.String())
		if err != nil {
			return err
		}
		s.regs = append(s.regs, p)
		if _, err = p.waitLine(listening, 10*time.Second); err == nil {
			s.reg = p
			if first {
				s.admin = registry.NewClient("http://"+s.addr, nil).WithToken(adminToken)
			}
			return nil
		}
		p.kill()
		if try == 5 {
			return fmt.Errorf("registry did not start on %s: %w\n%s", s.addr, err, p.text())
		}
	}
}

// restartRegistry stops the registry with sig, waits down, then starts it
// again from its state file.
func (s *schedule) restartRegistry(sig syscall.Signal, down time.Duration) error {
	s.reg.signal(sig)
	if _, err := s.reg.waitExit(exitWithin); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	pause(down)
	if err := s.startRegistry(false); err != nil {
		return err
	}
	s.logf("registry up again (pid %d)", s.reg.pid())
	return nil
}

// startRunner starts a runner on h: under a new name, or again under the
// last one with its state file, as systemd restarts it on the same host.
func (s *schedule) startRunner(h *host, sameHost bool) error {
	if !sameHost || h.cur == nil {
		h.gen++
	}
	name := fmt.Sprintf("h%d-%d", h.i, h.gen)
	state := filepath.Join(s.dir, name+".state.json")
	env := append(os.Environ(), "AWS_EC2_METADATA_SERVICE_ENDPOINT="+h.imds.URL, "NOTIFY_SOCKET=", markEnv+"="+s.mark)
	p, err := startProc(runnerBin, env,
		"-registry", "http://"+s.addr, "-name", name, "-state", state, "-join-token-file", filepath.Join(s.dir, "join-token"), "-sources", "signal,imds",
		"-job-env", "PATH,"+markEnv, "-poll", "50ms", "-grace", grace.String(), "-margin", margin.String(),
		"-stop-timeout", stopTimeout.String(), "-register-timeout", "20s",
		"-imds-interval", "50ms", "-imds-advisory-interval", "1s")
	if err != nil {
		return err
	}
	h.cur = &runnerRec{p: p, name: name, state: state}
	s.runners = append(s.runners, h.cur)
	s.logf("host %d: runner %s started (pid %d)", h.i, name, p.pid())
	return nil
}

// reap replaces the runners that have exited: one killed comes back on
// the same host half the time, one that holds a result it could not
// deliver (exit 3, or killed with one in its state file) always does (a host whose runner has results to deliver and
// never comes back leaves its jobs to be run again: the README says so);
// any other comes up under a new name, on a new host.
func (s *schedule) reap() error {
	for _, h := range s.hosts {
		r := h.cur
		if !r.p.done() {
			continue
		}
		same := false
		switch {
		case r.p.code == 3 || holdsResult(r.state):
			same = true
		case !r.killedAt.IsZero():
			same = s.rngR.IntN(2) == 0
		}
		s.logf("host %d: runner %s exited %s", h.i, r.name, r.p.status())
		if h.notified {
			h.imds.ClearInterruption()
			h.notified = false
		}
		if err := s.startRunner(h, same); err != nil {
			return err
		}
	}
	return nil
}

// holdsResult reports whether a runner's state file holds a result it
// could not deliver (after exit 3, or a runner killed before it could).
func holdsResult(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var st struct {
		Pending json.RawMessage `json:"pending"`
	}
	return json.Unmarshal(b, &st) == nil && len(st.Pending) > 0 && string(st.Pending) != "null"
}

// finish lets every job complete, with the registry up and no more
// faults, then stops every runner with SIGTERM.
func (s *schedule) finish() error {
	s.logf("faults over")
	deadline := time.Now().Add(finishWithin)
	for {
		if err := s.reap(); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		jobs, err := s.admin.Jobs(ctx)
		cancel()
		done := err == nil
		for _, j := range jobs {
			if j.State != registry.JobSucceeded {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			s.logf("jobs not all done after %v: %v", finishWithin, err)
			break // the checks count them as lost
		}
		pause(100 * time.Millisecond) // a poll with a deadline
	}
	s.logf("all jobs done; SIGTERM to every runner")
	for _, h := range s.hosts {
		h.cur.p.signal(syscall.SIGTERM)
	}
	for _, h := range s.hosts {
		r := h.cur
		if _, err := r.p.waitExit(exitWithin); err != nil {
			s.unstopped = append(s.unstopped, r)
			s.logf("host %d: runner %s still running %v after SIGTERM: SIGKILL", h.i, r.name, exitWithin)
			r.p.kill()
			continue
		}
		s.logf("host %d: runner %s exited %s", h.i, r.name, r.p.status())
	}
	return nil
}

func (s *schedule) report(full bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  seed %d, dir %s\n", s.seed, s.dir)
	for _, e := range s.events {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	if full {
		if runs, err := os.ReadFile(filepath.Join(s.dir, "runs.log")); err == nil {
			fmt.Fprintf(&b, "  runs.log:\n%s", indent(string(runs)))
		}
		for _, r := range s.runners {
			fmt.Fprintf(&b, "  runner %s pid %d:\n%s", r.name, r.p.pid(), indent(r.p.text()))
		}
		for _, p := range s.regs {
			// Without the requests that went well: one per poll.
			var keep []string
			for _, l := range strings.Split(p.text(), "\n") {
				if !strings.Contains(l, "msg=request") || !strings.Contains(l, " status=2") {
					keep = append(keep, l)
				}
			}
			fmt.Fprintf(&b, "  registry pid %d (requests answered 2xx left out):\n%s", p.pid(), indent(strings.Join(keep, "\n")))
		}
	}
	return b.String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

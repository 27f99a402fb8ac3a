//go:build linux

package chaos_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/termsig/termsig/examples/registry"
)

// A run is one line of runs.log: a job's run starting, ending, or finding
// another run of it still alive.
type run struct {
	what, job, runner string
	runnerPID, pid    int
	at                time.Time
}

func readRuns(path string) ([]run, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var runs []run
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 6 {
			return nil, fmt.Errorf("runs.log: bad line %q", l)
		}
		rpid, err1 := strconv.Atoi(f[3])
		pid, err2 := strconv.Atoi(f[4])
		ns, err3 := strconv.ParseInt(f[5], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("runs.log: bad line %q", l)
		}
		runs = append(runs, run{f[0], f[1], f[2], rpid, pid, time.Unix(0, ns)})
	}
	return runs, nil
}

// check counts what went wrong in the schedule. The waits for leases to
// lapse and for processes to go are polls with a deadline. It returns the
// counts and a line for each problem.
func (s *schedule) check(played bool) (c counts, problems []string) {
	fail := func(n *int, format string, args ...any) {
		*n++
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	c.schedules = 1
	c.jobs = len(s.jobs)
	for _, r := range s.unstopped {
		fail(&c.unstopped, "runner %s (pid %d) still running %v after SIGTERM", r.name, r.p.pid(), exitWithin)
	}

	// No stale registration once leases lapse: every runner has exited.
	var left []registry.Runner
	if played {
		deadline := time.Now().Add(2*lease + 3*time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rs, err := s.admin.Runners(ctx, "")
			cancel()
			left = rs
			if err == nil && len(rs) == 0 || time.Now().After(deadline) {
				break
			}
			pause(100 * time.Millisecond)
		}
		for _, rn := range left {
			fail(&c.stale, "stale registration %s (%s) %v after the last runner exited", rn.ID, rn.Name, 2*lease+3*time.Second)
		}
	}

	// No process of any job left. The keeper of a killed runner kills its
	// group as soon as it reads end of file: give it a moment.
	deadline := time.Now().Add(5 * time.Second)
	pids := marked(s.mark)
	for len(pids) > 0 && time.Now().Before(deadline) {
		pause(50 * time.Millisecond)
		pids = marked(s.mark)
	}
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		fail(&c.leftover, "process %d of a job left: %q", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}

	runs, err := readRuns(filepath.Join(s.dir, "runs.log"))
	if err != nil {
		problems = append(problems, err.Error())
	}
	byJob := map[string][]run{}
	for _, r := range runs {
		byJob[r.job] = append(byJob[r.job], r)
		if r.what == "dup" {
			fail(&c.concurrent, "job %s started on %s (pid %d) while an earlier run of it was alive", r.job, r.runner, r.runnerPID)
		}
	}

	var jobs []registry.Job
	if played {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		jobs, err = s.admin.Jobs(ctx)
		cancel()
		if err != nil {
			problems = append(problems, "listing jobs: "+err.Error())
		}
	}
	state := map[string]registry.Job{}
	for _, j := range jobs {
		state[j.ID] = j
	}
	byPID := map[int]*runnerRec{}
	for _, r := range s.runners {
		byPID[r.p.pid()] = r
	}
	for _, id := range s.jobs {
		j, ok := state[id]
		var ends []run
		for _, r := range byJob[id] {
			if r.what == "end" {
				ends = append(ends, r)
			}
		}
		switch {
		case !ok || j.State != registry.JobSucceeded:
			fail(&c.lost, "job %s not completed: %s", id, j.State)
			continue
		case len(ends) == 0:
			fail(&c.lost, "job %s succeeded in the registry but never ended", id)
			continue
		}
		c.completed++
		if j.Attempts > 1 {
			c.requeued++
		}
		// Every end but the last was run again: allowed only where the
		// runner was SIGKILLed after the end (before it could report),
		// or the drain SIGKILLed the job in the same window.
		accepted := regexp.MustCompile(`job ` + regexp.QuoteMeta(id) + ` (ended: .*; reported|reported: )|delivered the result of job ` + regexp.QuoteMeta(id) + ` `)
		killedJob := regexp.MustCompile(`job ` + regexp.QuoteMeta(id) + ` still running: SIGKILL`)
		for _, e := range ends[:len(ends)-1] {
			r := byPID[e.runnerPID]
			switch {
			case s.anyLineBetween(e.at, nextStart(byJob[id], e.at), accepted):
				fail(&c.duplicates, "job %s completed on %s (pid %d) at %s, its result was taken, and it was run again", id, e.runner, e.runnerPID, e.at.Format("15:04:05.000"))
			case r != nil && !r.killedAt.IsZero() && r.killedAt.After(e.at):
				c.rerunsAfterKill++
			case r != nil && hasLine(r.p, killedJob):
				c.rerunsAfterKill++
			default:
				fail(&c.duplicates, "job %s completed on %s (pid %d) at %s and was run again", id, e.runner, e.runnerPID, e.at.Format("15:04:05.000"))
			}
		}
	}

	for _, r := range s.runners {
		s.checkDrain(r, runs, &c, fail)
	}
	return c, problems
}

// nextStart returns the time of the first start in runs after t.
func nextStart(runs []run, t time.Time) time.Time {
	for _, r := range runs {
		if r.what == "start" && r.at.After(t) {
			return r.at
		}
	}
	return time.Time{}
}

// anyLineBetween reports whether a runner logged a line matching re after
// from and before to.
func (s *schedule) anyLineBetween(from, to time.Time, re *regexp.Regexp) bool {
	for _, r := range s.runners {
		for _, l := range r.p.output() {
			if l.at.After(from) && l.at.Before(to) && re.MatchString(l.text) {
				return true
			}
		}
	}
	return false
}

func hasLine(p *proc, re *regexp.Regexp) bool {
	for _, l := range p.output() {
		if re.MatchString(l.text) {
			return true
		}
	}
	return false
}

var (
	relStamp   = regexp.MustCompile(`^\[T\s*([+-])\s*([0-9.]+)s\] `)
	started    = regexp.MustCompile(`\] job (\S+) started `)
	deadlineIn = regexp.MustCompile(`(?:\] deadline in|the deadline is now in) (\S+?),?(?: SIGKILL|$)`)
	stopTO     = regexp.MustCompile(`using -stop-timeout, (\S+)$|further than -stop-timeout \((\S+)\)`)
	exited     = regexp.MustCompile(`^\[T.*; exit \d+(?: |$)`)
	drained    = regexp.MustCompile(`\] summary: .*; exit 0$|\] could not unregister runner .*; exit 3 `)
)

// checkDrain checks one runner's drain in its timeline: no job started
// after the notice (the first line stamped relative to it), and the drain
// was over by the deadline.
func (s *schedule) checkDrain(r *runnerRec, runs []run, c *counts, fail func(*int, string, ...any)) {
	lines := r.p.output()
	mark := -1
	for i, l := range lines {
		if relStamp.MatchString(l.text) {
			mark = i
			break
		}
	}
	if mark < 0 {
		return
	}
	// Every run the runner started (by runs.log, the ground truth) it
	// logged as started before the notice.
	before := map[string]bool{}
	for _, l := range lines[:mark] {
		if m := started.FindStringSubmatch(l.text); m != nil {
			before[m[1]] = true
		}
	}
	for _, l := range lines[mark:] {
		if m := started.FindStringSubmatch(l.text); m != nil {
			fail(&c.afterNotice, "runner %s started job %s after its notice: %s", r.name, m[1], l.text)
		}
	}
	for _, run := range runs {
		if run.what == "start" && run.runnerPID == r.p.pid() && !before[run.job] {
			fail(&c.afterNotice, "job %s ran on runner %s, which did not start it before its notice", run.job, r.name)
		}
	}

	if r.p.done() && r.killedAt.IsZero() && !hasLine(r.p, exited) {
		fail(&c.lateDrains, "runner %s: its drain never finished (%s)", r.name, r.p.status())
	}
	var due time.Duration = -1
	for _, l := range lines[mark:] {
		at, ok := rel(l.text)
		if !ok {
			continue
		}
		var d time.Duration
		var err error
		if m := deadlineIn.FindStringSubmatch(l.text); m != nil {
			d, err = time.ParseDuration(m[1])
			d += at
		} else if m := stopTO.FindStringSubmatch(l.text); m != nil {
			d, err = time.ParseDuration(m[1] + m[2])
		} else {
			if drained.MatchString(l.text) && due >= 0 && at > due+lateTolerance {
				fail(&c.lateDrains, "runner %s: drain over at T+%v, deadline T+%v: %s", r.name, at, due, l.text)
			}
			continue
		}
		if err == nil && (due < 0 || d < due) {
			due = d
		}
	}
}

// rel returns the time after the notice of a timeline line.
func rel(text string) (time.Duration, bool) {
	m := relStamp.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return 0, false
	}
	d := time.Duration(f * float64(time.Second))
	if m[1] == "-" {
		d = -d
	}
	return d, true
}

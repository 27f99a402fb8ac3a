package ghfake

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// GitHub's values of a run's or job's status and conclusion.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"

	ConclusionSuccess   = "success"
	ConclusionFailure   = "failure"
	ConclusionCancelled = "cancelled"
)

// The labels every runner has, as GitHub gives a Linux x64 runner.
var defaultLabels = []string{"self-hosted", "Linux", "X64"}

// state is everything the server knows. It is guarded by Server.mu.
type state struct {
	closed   bool
	changed  chan struct{} // closed and replaced at every change
	started  time.Time
	next     ids
	runners  map[int64]*runner
	runs     []*run // oldest first
	jobs     map[int64]*job
	repos    map[string]*repo // by lower-case full name
	tokens   map[string]regToken
	labelIDs map[string]int64 // by lower-case name
	calls    []Call
	faults   []*Fault
	rate     rateWindow
}

// ids hands out ids; each kind has its own range, so that a test that
// takes a run's id for a job's fails. tick orders the repositories'
// timestamps, which may be equal.
type ids struct{ runner, run, job, repo, label, tick int64 }

func newState(now time.Time) state {
	return state{
		changed:  make(chan struct{}),
		started:  now,
		next:     ids{runner: 0, run: 9_000_000_000, job: 25_000_000_000, repo: 700_000_000, label: 0},
		runners:  map[int64]*runner{},
		jobs:     map[int64]*job{},
		repos:    map[string]*repo{},
		tokens:   map[string]regToken{},
		labelIDs: map[string]int64{},
		rate:     rateWindow{reset: now.Add(time.Hour)},
	}
}

// notifyLocked tells every waiter on Changed that something changed.
func (st *state) notifyLocked() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// A regToken is a registration token that was handed out.
type regToken struct {
	scope   string // lower case
	expires time.Time
}

// A runner is a registration.
type runner struct {
	id        int64
	name      string
	scope     string // "owner/repo" or "org", as registered
	labels    []label
	online    bool
	busy      bool
	ephemeral bool
	secret    string   // the listener's credential
	sess      *session // the listener's connection, if any
	spent     bool     // ephemeral, and was given its one job
}

type label struct {
	id   int64
	name string
	typ  string // "read-only" or "custom"
}

// A repo is a repository that has runs.
type repo struct {
	id      int64
	owner   string
	name    string
	created moment
	updated moment // by a push: GitHub's updated_at changes with the repository, not with its runs
	pushed  moment
}

// A moment is a time, and a tick that orders equal times.
type moment struct {
	at   time.Time
	tick int64
}

// nowLocked returns the moment now.
func (st *state) nowLocked() moment {
	st.next.tick++
	return moment{at: time.Now(), tick: st.next.tick}
}

// compare orders m before n if it is earlier.
func (m moment) compare(n moment) int {
	if c := m.at.Compare(n.at); c != 0 {
		return c
	}
	return cmp.Compare(m.tick, n.tick)
}

func (r *repo) fullName() string { return r.owner + "/" + r.name }

// A run is a workflow run. Each of its workflow's jobs has a slot, which
// holds that job's executions, one per attempt it ran in, oldest first.
type run struct {
	id         int64
	repo       *repo
	name       string
	number     int
	attempt    int
	status     string
	conclusion string
	cancelling bool // a cancel was requested in this attempt
	cancelled  bool // a cancel was ever requested
	forced     bool // a force-cancel was ever accepted
	reruns     []string
	slots      [][]*job
	created    time.Time
	updated    time.Time
	started    time.Time // of the current attempt
}

// latest returns the newest execution of each of the run's jobs.
func (rn *run) latest() []*job {
	out := make([]*job, 0, len(rn.slots))
	for _, slot := range rn.slots {
		out = append(out, slot[len(slot)-1])
	}
	return out
}

// all returns every execution of the run's jobs, by id.
func (rn *run) all() []*job {
	var out []*job
	for _, slot := range rn.slots {
		out = append(out, slot...)
	}
	slices.SortFunc(out, func(a, b *job) int { return cmp.Compare(a.id, b.id) })
	return out
}

// A job is one execution of a workflow job.
type job struct {
	id          int64
	run         *run
	slot        int
	attempt     int
	name        string
	labels      []string
	duration    time.Duration
	fail        bool
	status      string
	conclusion  string
	runnerID    int64
	runnerName  string
	created     time.Time
	started     time.Time
	completed   time.Time
	annotations []string
}

// key is how names are compared: GitHub's are case-insensitive.
func key(s string) string { return strings.ToLower(s) }

// validScope reports whether scope is "owner/repo" or "org".
func validScope(scope string) bool {
	parts := strings.Split(scope, "/")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.ContainsAny(p, " ?#") {
			return false
		}
	}
	return true
}

// covers reports whether a runner of scope may take a job of repository
// full: its own repository's, or any of its organisation's.
func covers(scope, full string) bool {
	if strings.Contains(scope, "/") {
		return strings.EqualFold(scope, full)
	}
	owner, _, _ := strings.Cut(full, "/")
	return strings.EqualFold(scope, owner)
}

// sortedRunnersLocked returns the runners by id.
func (st *state) sortedRunnersLocked() []*runner {
	out := make([]*runner, 0, len(st.runners))
	for _, id := range slices.Sorted(maps.Keys(st.runners)) {
		out = append(out, st.runners[id])
	}
	return out
}

// Changed returns a channel that is closed at the next change of the
// state or the next REST API request (its arrival or its answer). Take
// the channel, check the state, then wait on the channel: no change is
// missed.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Await waits until cond returns true, checking it now and after each
// change (see [Server.Changed]), or until ctx ends, when it returns an
// error that wraps ctx's cause. cond is called without the server's lock
// held, so it may call the server's methods.
func (s *Server) Await(ctx context.Context, cond func() bool) error {
	for {
		ch := s.Changed()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("ghfake: condition not met: %w", context.Cause(ctx))
		}
	}
}

package asgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/termsig/termsig/internal/fakefault"
)

// The lifecycle states of an instance, as [Server.State] and
// DescribeAutoScalingInstances give them.
const (
	StateInService  = "InService"
	StateWait       = "Terminating:Wait"
	StateProceed    = "Terminating:Proceed"
	StateTerminated = "Terminated"
)

// ActionTimeout is the Action of the entries that [Server.Calls] records
// for a lifecycle action that timed out; AwaitCalls takes it too.
const ActionTimeout = "Timeout"

const (
	transitionTerminating = "autoscaling:EC2_INSTANCE_TERMINATING"
	resultContinue        = "CONTINUE"
	resultAbandon         = "ABANDON"
	accountID             = "123456789012"
)

// A Hook is a lifecycle hook of a group, as PutLifecycleHook makes one.
// The zero value of a field but Name stands for Auto Scaling's default.
type Hook struct {
	Name string

	// Transition is the hook's LifecycleTransition; "" means
	// "autoscaling:EC2_INSTANCE_TERMINATING". Only termination hooks hold
	// a scale-in; others are only described.
	Transition string

	// HeartbeatTimeout is how long an instance waits on the hook after its
	// lifecycle action starts or its last heartbeat; 0 means 3600 s. It
	// is whole seconds, at least 1 s: the fake allows less than AWS's
	// 30 s, for tests.
	HeartbeatTimeout time.Duration

	// GlobalTimeout bounds the whole wait, heartbeats or not, in whole
	// seconds; 0 means min(48 h, 100 × HeartbeatTimeout), as on AWS.
	GlobalTimeout time.Duration

	// DefaultResult is what applies when the action times out: CONTINUE
	// or ABANDON; "" means ABANDON, AWS's default.
	DefaultResult string
}

// normalized returns h with its defaults filled in. It panics on a hook
// that AWS would not take, as a misuse of the fake.
func (h Hook) normalized() Hook {
	if h.Name == "" {
		panic("termsig: asgtest: a Hook needs a Name")
	}
	if h.Transition == "" {
		h.Transition = transitionTerminating
	}
	if h.HeartbeatTimeout == 0 {
		h.HeartbeatTimeout = time.Hour
	}
	if h.GlobalTimeout == 0 {
		h.GlobalTimeout = min(48*time.Hour, 100*h.HeartbeatTimeout)
	}
	for _, d := range []time.Duration{h.HeartbeatTimeout, h.GlobalTimeout} {
		if d < time.Second || d%time.Second != 0 {
			panic(fmt.Sprintf("termsig: asgtest: hook %s: timeouts are whole seconds, at least 1 s, not %v", h.Name, d))
		}
	}
	switch h.DefaultResult {
	case "":
		h.DefaultResult = resultAbandon
	case resultContinue, resultAbandon:
	default:
		panic(fmt.Sprintf("termsig: asgtest: hook %s: DefaultResult is CONTINUE or ABANDON, not %q", h.Name, h.DefaultResult))
	}
	return h
}

// A Call is one entry of the log of [Server.Calls]: an API request that
// the server answered itself (not one a fault answered), or a lifecycle
// action that timed out (Action [ActionTimeout], Result the hook's
// DefaultResult that then applied).
type Call struct {
	Action     string // such as "RecordLifecycleActionHeartbeat"
	Group      string // AutoScalingGroupName
	Hook       string // LifecycleHookName
	InstanceID string // InstanceId, or the instance of the action found by token; InstanceIds joined with ","
	Token      string // LifecycleActionToken, or the token of the action found by instance
	Result     string // LifecycleActionResult
	At         time.Time
	Err        string // the error code sent, "" when the call succeeded
}

// An Action is a lifecycle action in progress: an instance's wait on one
// termination hook.
type Action struct {
	Hook              string
	Token             string
	Start             time.Time
	HeartbeatDeadline time.Time // when it times out without a heartbeat; never after GlobalDeadline
	GlobalDeadline    time.Time
}

// A Server is a fake of the Auto Scaling API on a loopback port, for
// tests. It serves the groups, hooks and instances the test adds, takes
// heartbeats and completions of lifecycle actions, and times them out as
// Auto Scaling does (see the package documentation). Faults are injected
// with [Server.Inject].
//
// Create it with [NewServer] and Close it when done. Its methods are safe
// for concurrent use.
type Server struct {
	// URL is the endpoint, such as http://127.0.0.1:41234: the SDK's
	// BaseEndpoint or AWS_ENDPOINT_URL_AUTO_SCALING.
	URL string

	// OnTargetState, if not nil, is called with an instance's target
	// lifecycle state when it changes, as IMDS's
	// autoscaling/target-lifecycle-state shows it: InService from
	// AddInstance, Terminated from ScaleIn, on their goroutine, so that a
	// test can mirror it into imdstest.Server.SetLifecycleState. Set it
	// before the first AddInstance.
	OnTargetState func(instanceID, state string)

	host   *fakefault.Host                    // the sockets and the request counts
	faults fakefault.Queue[fakefault.Effects] // has a lock of its own
	timers sync.WaitGroup                     // the timers that are scheduled or running

	mu         sync.Mutex
	closed     bool
	done       chan struct{} // closed by Close: AwaitCalls gives up
	groups     map[string]*group
	instances  map[string]*instance
	activities []*activity // oldest first
	denied     map[string]bool
	calls      []Call
	proceedFor time.Duration
	changed    chan struct{} // closed and replaced when a Call is recorded or a state changes
}

type group struct {
	name  string
	id    string // the uuid of its ARN
	hooks []Hook // normalized, in the order added
}

func (g *group) arn(region string) string {
	return "arn:aws:autoscaling:" + region + ":" + accountID + ":autoScalingGroup:" + g.id + ":autoScalingGroupName/" + g.name
}

type instance struct {
	id       string
	group    string
	state    string
	actions  []*action   // the lifecycle actions in progress, in hook order
	activity *activity   // its termination, once ScaleIn began it
	timer    *time.Timer // ends Terminating:Proceed (SetProceedFor)
}

type action struct {
	hook     Hook
	token    string
	start    time.Time
	deadline time.Time // the heartbeat deadline, at most global
	global   time.Time
	timer    *time.Timer
	gen      int // which timer is the current one
}

type activity struct {
	id       string
	group    string
	instance string
	cause    string
	start    time.Time
	end      time.Time // zero while in progress
}

// NewServer starts a fake Auto Scaling API on 127.0.0.1 with no groups.
func NewServer() *Server {
	s := &Server{
		done:      make(chan struct{}),
		groups:    map[string]*group{},
		instances: map[string]*instance{},
		denied:    map[string]bool{},
		changed:   make(chan struct{}),
	}
	s.host = fakefault.NewHost("asgtest")
	s.URL = s.host.URL()
	s.host.Serve(http.HandlerFunc(s.handle))
	return s
}

// Stop makes the server go away, as the API does when the network path to
// it breaks: it stops listening and drops every open connection, so
// clients see connection refused or reset. Lifecycle actions go on timing
// out. Start brings it back on the same address with the same state.
// Stop on a stopped server does nothing.
func (s *Server) Stop() { s.host.Stop() }

// Start brings a stopped server back on its address. It returns an error
// if the address cannot be had again, or if the server was closed.
func (s *Server) Start() error { return s.host.Start() }

// Close releases every request that hangs (their connections are closed
// without an answer), closes all connections, stops the timers of the
// lifecycle actions and shuts the server down; Start fails after it, and
// AwaitCalls returns. When Close returns no goroutine of the server's
// runs. It is safe to call more than once.
func (s *Server) Close() {
	s.host.Close()
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
		for _, in := range s.instances {
			for _, a := range in.actions {
				s.stopTimer(&a.timer)
			}
			s.stopTimer(&in.timer)
		}
	}
	s.mu.Unlock()
	s.timers.Wait()
}

// AddGroup adds an Auto Scaling group named name with hooks, or replaces
// the hooks of the group of that name (actions in progress keep theirs).
// It panics on a Hook that Auto Scaling would not take.
func (s *Server) AddGroup(name string, hooks ...Hook) {
	hs := make([]Hook, len(hooks))
	for i, h := range hooks {
		hs[i] = h.normalized()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.groups[name]; ok {
		g.hooks = hs
		return
	}
	s.groups[name] = &group{name: name, id: newUUID(), hooks: hs}
}

// AddInstance adds instance id to group, InService, and calls
// OnTargetState with InService. It panics if there is no such group, or
// the instance is known already.
func (s *Server) AddInstance(id, group string) {
	s.mu.Lock()
	if s.groups[group] == nil {
		s.mu.Unlock()
		panic("termsig: asgtest: AddInstance: no group " + group)
	}
	if s.instances[id] != nil {
		s.mu.Unlock()
		panic("termsig: asgtest: AddInstance: instance " + id + " exists")
	}
	s.instances[id] = &instance{id: id, group: group, state: StateInService}
	cb := s.OnTargetState
	s.mu.Unlock()
	if cb != nil {
		cb(id, StateInService)
	}
}

// ScaleIn begins the termination of instance id, as a scale-in that
// picked it does, and records the scaling activity. With termination hooks
// the instance goes to Terminating:Wait with one lifecycle action per hook
// (see [Server.Actions]); without, it goes through Terminating:Proceed to
// Terminated at once. Then it calls OnTargetState with Terminated. It is
// an error if the instance is unknown or not InService, or the server is
// closed.
func (s *Server) ScaleIn(id string) error {
	s.mu.Lock()
	in := s.instances[id]
	switch {
	case s.closed:
		s.mu.Unlock()
		return errors.New("asgtest: server closed")
	case in == nil:
		s.mu.Unlock()
		return fmt.Errorf("asgtest: ScaleIn: no instance %s", id)
	case in.state != StateInService:
		s.mu.Unlock()
		return fmt.Errorf("asgtest: ScaleIn: instance %s is %s, not InService", id, in.state)
	}
	now := time.Now()
	in.activity = &activity{id: newUUID(), group: in.group, instance: id, start: now, cause: s.cause(in, now)}
	s.activities = append(s.activities, in.activity)
	s.setState(in, StateWait)
	for _, h := range s.groups[in.group].hooks {
		if h.Transition != transitionTerminating {
			continue
		}
		a := &action{hook: h, token: newUUID(), start: now, global: now.Add(h.GlobalTimeout)}
		a.deadline = minTime(now.Add(h.HeartbeatTimeout), a.global)
		in.actions = append(in.actions, a)
		s.schedule(in, a)
	}
	if len(in.actions) == 0 {
		s.proceed(in, now)
	}
	cb := s.OnTargetState
	s.mu.Unlock()
	if cb != nil {
		cb(id, StateTerminated)
	}
	return nil
}

// cause words the Cause of in's termination activity as Auto Scaling does
// for a scale-in. s.mu must be held.
func (s *Server) cause(in *instance, now time.Time) string {
	n := 0
	for _, o := range s.instances {
		if o.group == in.group && o.state == StateInService {
			n++
		}
	}
	at := now.UTC().Format(time.RFC3339)
	return fmt.Sprintf("At %s an instance was taken out of service in response to a difference between desired and actual capacity, shrinking the capacity from %d to %d. At %s instance %s was selected for termination.",
		at, n, n-1, at, in.id)
}

// State returns the lifecycle state of instance id: InService,
// Terminating:Wait, Terminating:Proceed or Terminated; "" if unknown.
func (s *Server) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.instances[id]; in != nil {
		return in.state
	}
	return ""
}

// Actions returns the lifecycle actions of instance id in progress, in
// the order of its group's hooks: none unless it is in Terminating:Wait.
func (s *Server) Actions(id string) []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[id]
	if in == nil {
		return nil
	}
	out := make([]Action, 0, len(in.actions))
	for _, a := range in.actions {
		out = append(out, Action{Hook: a.hook.Name, Token: a.token, Start: a.start, HeartbeatDeadline: a.deadline, GlobalDeadline: a.global})
	}
	return out
}

// Calls returns the log: the API requests the server answered itself, in
// the order they were answered, and the lifecycle actions that timed out.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// AwaitCalls waits until the log holds at least n successful entries of
// action (an Action such as "CompleteLifecycleAction", or
// [ActionTimeout]), and returns nil; or until ctx is done or the server
// closed, and returns an error. The state the calls left is in place when
// it returns: after a CompleteLifecycleAction that ended the last action,
// State is Terminated.
func (s *Server) AwaitCalls(ctx context.Context, action string, n int) error {
	for {
		s.mu.Lock()
		got, ch := 0, s.changed
		for _, c := range s.calls {
			if c.Action == action && c.Err == "" {
				got++
			}
		}
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("asgtest: %d of %d calls of %s: %w", got, n, action, context.Cause(ctx))
		case <-s.done:
			return fmt.Errorf("asgtest: %d of %d calls of %s: server closed", got, n, action)
		}
	}
}

// AwaitState waits until instance id is in state, such as Terminated,
// and returns nil; or until ctx is done or the server closed, and returns
// an error.
func (s *Server) AwaitState(ctx context.Context, id, state string) error {
	for {
		s.mu.Lock()
		got, ch := "", s.changed
		if in := s.instances[id]; in != nil {
			got = in.state
		}
		s.mu.Unlock()
		if got == state {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("asgtest: instance %s is %q, not %s: %w", id, got, state, context.Cause(ctx))
		case <-s.done:
			return fmt.Errorf("asgtest: instance %s is %q, not %s: server closed", id, got, state)
		}
	}
}

// record appends c to the log. s.mu must be held.
func (s *Server) record(c Call) {
	s.calls = append(s.calls, c)
	s.changedLocked()
}

// setState moves in to state. s.mu must be held.
func (s *Server) setState(in *instance, state string) {
	in.state = state
	s.changedLocked()
}

func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// SetProceedFor sets how long an instance stays in Terminating:Proceed
// once its lifecycle actions have ended, before it is Terminated, as EC2
// takes a while to shut it down. 0, the default, makes it Terminated at
// once. It applies to the instances that proceed from then on.
func (s *Server) SetProceedFor(d time.Duration) {
	s.mu.Lock()
	s.proceedFor = d
	s.mu.Unlock()
}

// Deny makes the server answer requests of action (such as
// "CompleteLifecycleAction") with AccessDenied, HTTP 403, as AWS does when
// the caller's role lacks autoscaling:<action>, until [Server.Allow].
func (s *Server) Deny(action string) {
	s.mu.Lock()
	s.denied[action] = true
	s.mu.Unlock()
}

// Allow undoes [Server.Deny] for action.
func (s *Server) Allow(action string) {
	s.mu.Lock()
	delete(s.denied, action)
	s.mu.Unlock()
}

// Requests returns how many requests of action (the Action parameter,
// such as "RecordLifecycleActionHeartbeat") the server has answered,
// faults, refusals and requests it hung up on included; "" counts every
// request. A request that hangs counts once it ends.
func (s *Server) Requests(action string) int { return s.host.Requests(action) }

// Served returns a channel that is closed when a request next arrives or
// is answered, so that a test can wait without sleeping: take the
// channel, check Requests or InFlight, and wait on the channel if the
// count is not there yet.
func (s *Server) Served() <-chan struct{} { return s.host.Served() }

// AwaitRequests waits until the server has answered at least n requests
// of action (as counted by Requests), or ctx is done; then it returns
// ctx's error.
func (s *Server) AwaitRequests(ctx context.Context, action string, n int) error {
	return s.host.AwaitRequests(ctx, action, n)
}

// InFlight returns how many requests the server is answering now, such as
// requests held by a fault with Hang or Delay.
func (s *Server) InFlight() int { return s.host.InFlight() }

// schedule (re)starts the timer that times a out at its deadline. s.mu
// must be held.
func (s *Server) schedule(in *instance, a *action) {
	a.gen++
	gen := a.gen
	s.startTimer(&a.timer, time.Until(a.deadline), func() { s.expire(in, a, gen) })
}

// startTimer replaces *t with a timer that calls f after d, unless the
// server is closed. s.mu must be held. f runs without it, and must call
// s.timers.Done.
func (s *Server) startTimer(t **time.Timer, d time.Duration, f func()) {
	s.stopTimer(t)
	if s.closed {
		return
	}
	s.timers.Add(1)
	*t = time.AfterFunc(d, f)
}

// stopTimer stops *t, if it has not fired, and clears it. s.mu must be
// held.
func (s *Server) stopTimer(t **time.Timer) {
	if *t != nil && (*t).Stop() {
		s.timers.Done() // its function will not run
	}
	*t = nil
}

// expire times a out, if timer gen is still its current one: a's
// deadline passed without a heartbeat (or its global deadline passed), and
// its hook's DefaultResult applies.
func (s *Server) expire(in *instance, a *action, gen int) {
	defer s.timers.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || a.gen != gen || !slices.Contains(in.actions, a) {
		return
	}
	a.timer = nil
	now := time.Now()
	s.end(in, a, a.hook.DefaultResult, now)
	s.record(Call{Action: ActionTimeout, Group: in.group, Hook: a.hook.Name, InstanceID: in.id, Token: a.token, Result: a.hook.DefaultResult, At: now})
}

// end ends lifecycle action a of in with result: ABANDON ends the
// instance's other actions too, and once none is left the instance
// proceeds. s.mu must be held.
func (s *Server) end(in *instance, a *action, result string, now time.Time) {
	in.actions = slices.DeleteFunc(in.actions, func(b *action) bool {
		if b == a || result == resultAbandon {
			s.stopTimer(&b.timer)
			return true
		}
		return false
	})
	if len(in.actions) == 0 {
		s.proceed(in, now)
	}
}

// proceed lets in go on to its termination: Terminating:Proceed, then,
// after the time of SetProceedFor, Terminated, which ends its activity.
// s.mu must be held.
func (s *Server) proceed(in *instance, now time.Time) {
	if s.proceedFor <= 0 {
		s.terminated(in, now)
		return
	}
	s.setState(in, StateProceed)
	s.startTimer(&in.timer, s.proceedFor, func() {
		defer s.timers.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.closed {
			in.timer = nil
			s.terminated(in, time.Now())
		}
	})
}

// terminated ends in and its activity. s.mu must be held.
func (s *Server) terminated(in *instance, now time.Time) {
	s.setState(in, StateTerminated)
	in.activity.end = now
}

// active returns the lifecycle action in progress of hook in groupName
// for instance id or token, or nil; the deadlines are looked at against
// now, so that an action whose timer has yet to run is not active. s.mu
// must be held.
func (s *Server) active(groupName, hook, id, token string, now time.Time) (*instance, *action) {
	ins := make([]*instance, 0, 1)
	if id != "" {
		if in := s.instances[id]; in != nil {
			ins = append(ins, in)
		}
	} else {
		for _, in := range s.instances {
			ins = append(ins, in)
		}
	}
	for _, in := range ins {
		if in.group != groupName {
			continue
		}
		for _, a := range in.actions {
			if a.hook.Name == hook && (token == "" || a.token == token) && now.Before(a.deadline) {
				return in, a
			}
		}
	}
	return nil, nil
}

// instancesSorted returns the instances that DescribeAutoScalingInstances
// lists (not Terminated ones, which have left their group), by id. s.mu
// must be held.
func (s *Server) instancesSorted() []*instance {
	out := make([]*instance, 0, len(s.instances))
	for _, in := range s.instances {
		if in.state != StateTerminated {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// newUUID returns a random (version 4) UUID, the form of Auto Scaling's
// tokens, activity ids and request ids.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

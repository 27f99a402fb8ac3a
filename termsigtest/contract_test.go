package termsigtest_test

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/termsigtest"
)

func TestFakeKeepsSourceContract(t *testing.T) {
	termsigtest.TestSource(t, func(*testing.T) (termsig.Source, func()) {
		f := termsigtest.NewFake("fake")
		return f, func() { f.Send(termsig.Notice{Kind: termsig.Terminate}) }
	})
}

// broken are sources that each break one rule of the contract, with what
// TestSource says about it.
var broken = map[string]struct {
	src  func() termsig.Source
	want string
}{
	"upper-case name":   {func() termsig.Source { return &brokenSource{name: "Flag"} }, `Name() = "Flag"`},
	"long name":         {func() termsig.Source { return &brokenSource{name: "a-name-far-longer-than-thirty-two-bytes"} }, "want 1 to 32 lower-case"},
	"unstable name":     {func() termsig.Source { return &brokenSource{unstable: true} }, "a name must be stable"},
	"returns early":     {func() termsig.Source { return &brokenSource{early: true} }, "Watch returned nil before its context was done"},
	"unavailable":       {func() termsig.Source { return &brokenSource{unavailable: true} }, "Watch returned before its context was done: termsig: source unavailable"},
	"lingers":           {func() termsig.Source { return &brokenSource{linger: 3 * time.Second} }, "Watch did not return within 2s of its context ending"},
	"sends late":        {func() termsig.Source { return &brokenSource{sendLate: true} }, "notices sent after Watch returned"},
	"leaks a goroutine": {func() termsig.Source { return &brokenSource{leak: true} }, "goroutines left behind after Watch returned"},
	"never ready":       {func() termsig.Source { return &brokenSource{neverReady: true} }, "Run.Ready not called within 10s"},
	"sends nothing":     {func() termsig.Source { return &brokenSource{mute: true} }, "no notice within 10s of notify"},
	"panics at stop":    {func() termsig.Source { return &brokenSource{end: func() { panic("boom") }} }, "Watch panicked: boom"},
	"goexits at stop":   {func() termsig.Source { return &brokenSource{end: runtime.Goexit} }, "Watch called runtime.Goexit"},
	"never returns":     {func() termsig.Source { return &brokenSource{end: func() { select {} }} }, "Watch did not return within 2s of its context ending"},
	"unavailable at stop": {func() termsig.Source { return &brokenSource{unavailableAtStop: true} },
		"Watch returned termsig: source unavailable on this host once its context was done, want nil or the context's error"},
	"returns at notify": {func() termsig.Source { return &brokenSource{returnAtNotify: true} }, "Watch returned nil before its context was done"},
}

// TestSourceFailsBrokenSources runs TestSource on each broken source in a
// process of its own (TestSource fails its t) and checks what it says.
func TestSourceFailsBrokenSources(t *testing.T) {
	if name := os.Getenv("TERMSIGTEST_BROKEN"); name != "" {
		b := broken[name]
		termsigtest.TestSource(t, func(*testing.T) (termsig.Source, func()) {
			s := b.src().(*brokenSource)
			s.notice = make(chan struct{})
			return s, func() { close(s.notice) }
		})
		return
	}
	for name, b := range broken {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each in its own process
			cmd := exec.Command(os.Args[0], "-test.run=^TestSourceFailsBrokenSources$", "-test.v")
			cmd.Env = append(os.Environ(), "TERMSIGTEST_BROKEN="+name)
			out, err := cmd.CombinedOutput()
			assert.Error(t, err, "TestSource passed a source that %s", name)
			assert.Contains(t, string(out), b.want)
		})
	}
}

// brokenSource sends a notice when notified, and breaks the contract as
// its fields say.
type brokenSource struct {
	name        string
	unstable    bool
	early       bool
	unavailable bool
	linger      time.Duration
	sendLate    bool
	leak        bool
	neverReady  bool
	mute        bool
	// end, if not nil, is called once ctx is done, instead of returning.
	end               func()
	unavailableAtStop bool
	returnAtNotify    bool

	calls  atomic.Int32
	notice chan struct{}
}

func (s *brokenSource) Name() string {
	if s.unstable {
		return []string{"one", "two"}[s.calls.Add(1)%2]
	}
	if s.name != "" {
		return s.name
	}
	return "broken"
}

func (s *brokenSource) Watch(ctx context.Context, r *termsig.Run) error {
	if !s.neverReady {
		r.Ready()
	}
	switch {
	case s.early:
		return nil
	case s.unavailable:
		return termsig.ErrUnavailable
	case s.leak:
		go func() { select {} }()
	}
	select {
	case <-s.notice:
		if s.returnAtNotify {
			return nil
		}
		if !s.mute {
			if err := r.Send(ctx, termsig.Notice{Kind: termsig.Terminate}); err != nil {
				return err
			}
		}
		<-ctx.Done()
	case <-ctx.Done():
	}
	if s.sendLate {
		go func() {
			time.Sleep(10 * time.Millisecond) // after Watch has returned
			_ = r.Send(context.Background(), termsig.Notice{Kind: termsig.Terminate})
		}()
	}
	if s.linger > 0 {
		time.Sleep(s.linger) // ignores ctx for a while
	}
	if s.end != nil {
		s.end()
	}
	if s.unavailableAtStop {
		return termsig.ErrUnavailable
	}
	return ctx.Err()
}

//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/termsig/termsig"
)

// fakeService is a CIService in memory. Its hooks, if set, run inside the
// calls, as a CI service's answer would come.
type fakeService struct {
	onRegister func()
	onClaim    func() *Job

	mu       sync.Mutex
	claims   int
	requeued []string
	reported []string
	removed  []string
	order    []string // "report J", "requeue J", "remove R", and what record adds, in order
}

// record adds what happened to s.order.
func (s *fakeService) record(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.order = append(s.order, what)
}

// calls returns s.order.
func (s *fakeService) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

func (s *fakeService) Register(context.Context, string, []string) (Registration, error) {
	if s.onRegister != nil {
		s.onRegister()
	}
	return Registration{ID: "r-1", Token: "secret"}, nil
}

func (s *fakeService) Remove(_ context.Context, reg Registration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed = append(s.removed, reg.ID)
	s.order = append(s.order, "remove "+reg.ID)
	return nil
}

func (s *fakeService) Heartbeat(context.Context, Registration) error { return nil }

func (s *fakeService) Claim(context.Context, Registration) (*Job, error) {
	s.mu.Lock()
	s.claims++
	s.mu.Unlock()
	if s.onClaim != nil {
		return s.onClaim(), nil
	}
	return nil, nil
}

func (s *fakeService) Report(_ context.Context, _ Registration, job *Job, _ Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reported = append(s.reported, job.ID)
	s.order = append(s.order, "report "+job.ID)
	return nil
}

func (s *fakeService) Requeue(_ context.Context, _ Registration, job *Job, _ Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requeued = append(s.requeued, job.ID)
	s.order = append(s.order, "requeue "+job.ID)
	return nil
}

// terminate is an imminent notice.
func terminate() termsig.Notice {
	return termsig.Notice{Source: "imds", Kind: termsig.Terminate, Observed: time.Now(), Deadline: time.Now().Add(2 * time.Minute)}
}

// testRunner returns a runner on svc and notices, logging into out.
func testRunner(svc CIService, notices chan termsig.Notice, ready <-chan struct{}, out io.Writer) *runner {
	return &runner{
		cfg:     config{name: "posted-runner", poll: time.Hour, grace: time.Second, margin: time.Second, stopTimeout: 10 * time.Second, registerTimeout: time.Second, onAdvice: "drain"},
		svc:     svc,
		tl:      newTimeline(out),
		notices: notices,
		stop:    func() {},
		notify:  func(string) {},
		ready:   ready,
	}
}

// A spot interruption that is already posted when the runner starts is on
// C by the time Ready closes. The runner must not ask for a job then.
func TestNoClaimWhenANoticeIsPostedAtStart(t *testing.T) {
	claimed := 0
	for range 200 {
		svc := &fakeService{}
		notices := make(chan termsig.Notice, 1)
		notices <- terminate()
		ready := make(chan struct{})
		close(ready)
		if code := testRunner(svc, notices, ready, io.Discard).run(); code != exitClean {
			t.Fatalf("exit %d", code)
		}
		if svc.claims > 0 {
			claimed++
		}
	}
	if claimed > 0 {
		t.Fatalf("claimed a job in %d/200 runs although the imminent notice was on C when Ready closed", claimed)
	}
}

// An imminent notice that is on C when the poll timer fires wins: select
// alone picks either at random, and took a job in about half the trials.
func TestNoClaimAfterAnImminentNotice(t *testing.T) {
	claimed := 0
	for range 200 {
		notices := make(chan termsig.Notice, 1)
		svc := &fakeService{onRegister: func() { notices <- terminate() }}
		if code := testRunner(svc, notices, nil, io.Discard).run(); code != exitClean {
			t.Fatalf("exit %d", code)
		}
		if svc.claims > 0 {
			claimed++
		}
	}
	if claimed > 0 {
		t.Fatalf("claimed a job in %d/200 runs although an imminent notice had come", claimed)
	}
}

// A notice that comes while a claim is answered: the job claimed is handed
// back unstarted, never run.
func TestNoJobStartsAfterAnImminentNotice(t *testing.T) {
	started := 0
	for i := range 200 {
		notices := make(chan termsig.Notice, 1)
		svc := &fakeService{onClaim: func() *Job {
			notices <- terminate()
			return &Job{ID: "j-1", Command: "exit 0"}
		}}
		var out strings.Builder
		if code := testRunner(svc, notices, nil, &out).run(); code != exitClean {
			t.Fatalf("trial %d: exit %d\n%s", i, code, out.String())
		}
		if strings.Contains(out.String(), "job j-1 started") {
			started++
			continue
		}
		if fmt.Sprint(svc.requeued) != "[j-1]" || len(svc.reported) > 0 || fmt.Sprint(svc.removed) != "[r-1]" {
			t.Fatalf("trial %d: re-queued %v, reported %v, removed %v\n%s", i, svc.requeued, svc.reported, svc.removed, out.String())
		}
	}
	if started > 0 {
		t.Fatalf("started the job in %d/200 runs although an imminent notice came with it", started)
	}
}

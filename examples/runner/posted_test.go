//go:build linux

package main

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/termsig/termsig"
)

type countingService struct{ claims atomic.Int32 }

func (s *countingService) Register(context.Context, string, []string) (string, error) {
	return "r1", nil
}
func (s *countingService) Lookup(context.Context, string) ([]string, error) { return nil, nil }
func (s *countingService) Remove(context.Context, string) error             { return nil }
func (s *countingService) Claim(context.Context, string) (*Job, error) {
	s.claims.Add(1)
	return nil, nil
}
func (s *countingService) Report(context.Context, string, *Job, Result) error  { return nil }
func (s *countingService) Requeue(context.Context, string, *Job, Result) error { return nil }

// A spot interruption that is already posted when the runner starts is on
// C by the time Ready closes. The runner must not ask for a job then.
func TestNoClaimWhenANoticeIsPostedAtStart(t *testing.T) {
	claimed := 0
	for range 200 {
		svc := &countingService{}
		notices := make(chan termsig.Notice, 1)
		notices <- termsig.Notice{Source: "imds", Kind: termsig.Terminate, Observed: time.Now(), Deadline: time.Now().Add(2 * time.Minute)}
		ready := make(chan struct{})
		close(ready)
		r := &runner{
			cfg:     config{name: "posted-runner", poll: time.Hour, grace: time.Second, margin: time.Second, stopTimeout: 10 * time.Second, registerTimeout: time.Second, onAdvice: "drain"},
			svc:     svc,
			tl:      newTimeline(io.Discard),
			notices: notices,
			stop:    func() {},
			notify:  func(string) {},
			ready:   ready,
		}
		if code := r.run(); code != exitClean {
			t.Fatalf("exit %d", code)
		}
		if svc.claims.Load() > 0 {
			claimed++
		}
	}
	if claimed > 0 {
		t.Fatalf("claimed a job in %d/200 runs although the imminent notice was on C when Ready closed", claimed)
	}
}

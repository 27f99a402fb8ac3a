// Package health keeps the health and the first look of the parts of one
// source (the paths imds polls, the keys gcemeta watches, the transports
// of acpi) and tells the source's Notifier what they add up to: one error
// or healthy, reported when that changes; every answer, as heard from the
// origin; and Ready once every part has had its first look.
package health

import (
	"sync"
	"time"

	"github.com/termsig/termsig"
)

// Parts is the health of n parts of a source, numbered from 0. Its methods
// are safe for concurrent use.
type Parts struct {
	run *termsig.Run

	mu       sync.Mutex
	errs     []error     // nil: the part works
	since    []time.Time // when each failing part started failing
	looked   []bool
	unlooked int
	last     error // what was reported last; nil: healthy
}

// New returns the Parts of a source watching with r, all healthy and none
// of them looked at yet.
func New(r *termsig.Run, n int) *Parts {
	return &Parts{
		run:      r,
		errs:     make([]error, n),
		since:    make([]time.Time, n),
		looked:   make([]bool, n),
		unlooked: n,
	}
}

// Set records the outcome of one attempt of part i: nil is an answer, a
// non-nil error a failure that the source retries. The source's health is
// the error of the part that has failed longest, or healthy when none
// fails; it is reported to the Notifier (Run.Report) when it changes, so
// that one outage seen by every part is one change, and every answer
// counts as hearing from the origin (Run.Heard).
func (p *Parts) Set(i int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock() // reported under mu, so that reports keep their order
	switch {
	case err == nil:
		p.since[i] = time.Time{}
	case p.errs[i] == nil:
		p.since[i] = time.Now()
	}
	p.errs[i] = err
	if err == nil {
		p.run.Heard()
	}
	cur := p.worst()
	if sameText(cur, p.last) {
		return
	}
	p.last = cur
	p.run.Report(cur)
}

// worst returns the error of the part failing longest, or nil.
func (p *Parts) worst() error {
	var worst error
	var at time.Time
	for i, err := range p.errs {
		if err != nil && (worst == nil || p.since[i].Before(at)) {
			worst, at = err, p.since[i]
		}
	}
	return worst
}

func sameText(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

// Looked records that part i has had its first look at its origin (a
// first answer or a first error, and the notices it called for sent).
// Once every part has, it calls Run.Ready. Looking again does nothing.
func (p *Parts) Looked(i int) {
	p.mu.Lock()
	first := !p.looked[i]
	p.looked[i] = true
	if first {
		p.unlooked--
	}
	all := first && p.unlooked == 0
	p.mu.Unlock()
	if all {
		p.run.Ready()
	}
}

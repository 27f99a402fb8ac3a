//go:build linux

package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// A timeline writes one line per step of the runner, stamped with the time
// since the runner started and, once a notice has arrived, with the time
// relative to that notice ("T+1.234s"), so that a person can read what
// happened when and how much of the deadline each step used.
type timeline struct {
	w     io.Writer
	start time.Time

	mu     sync.Mutex
	notice time.Time // zero until the first imminent notice
	steps  []string  // the lines since the notice, for the summary
}

func newTimeline(w io.Writer) *timeline { return &timeline{w: w, start: time.Now()} }

// mark sets the time the relative stamps count from.
func (t *timeline) mark(at time.Time) {
	t.mu.Lock()
	t.notice = at
	t.mu.Unlock()
}

// since returns the time since the notice (0 before it).
func (t *timeline) since() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.notice.IsZero() {
		return 0
	}
	return time.Since(t.notice)
}

func (t *timeline) stamp(now time.Time) string {
	if t.notice.IsZero() {
		return fmt.Sprintf("[%8.3fs]", now.Sub(t.start).Seconds())
	}
	return fmt.Sprintf("[T%+8.3fs]", now.Sub(t.notice).Seconds())
}

// Printf writes one line.
func (t *timeline) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stamp(time.Now()) + " " + strings.TrimRight(line, "\n")
	if !t.notice.IsZero() {
		t.steps = append(t.steps, s)
	}
	fmt.Fprintln(t.w, s)
}

// Steps returns the lines written since the notice.
func (t *timeline) Steps() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.steps...)
}

// fmtDur prints d with millisecond precision.
func fmtDur(d time.Duration) string { return d.Round(time.Millisecond).String() }

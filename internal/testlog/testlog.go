// Package testlog provides a slog.Handler for tests that keeps every record
// and lets a test wait for a message without sleeping.
package testlog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// Wait is how long WaitFor waits before failing the test.
const Wait = 5 * time.Second

// A Recorder is a slog.Handler that records every record at every level.
// It is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	records []slog.Record
	changed chan struct{} // closed and replaced on every record
}

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{changed: make(chan struct{})} }

// Logger returns a logger that writes to r.
func (r *Recorder) Logger() *slog.Logger { return slog.New(r) }

// Enabled implements slog.Handler: every level is recorded.
func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs implements slog.Handler; the attributes are dropped.
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup implements slog.Handler; the group is dropped.
func (r *Recorder) WithGroup(string) slog.Handler { return r }

// Handle implements slog.Handler.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.records = append(r.records, rec.Clone())
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return nil
}

// WaitFor waits until msg has been logged n times in all and returns the
// last such record; it fails the test after Wait.
func (r *Recorder) WaitFor(t testing.TB, msg string, n int) slog.Record {
	t.Helper()
	var last slog.Record
	r.WaitUntil(t, fmt.Sprintf("%q logged %d times", msg, n), func(all []slog.Record) bool {
		c := 0
		for _, rec := range all {
			if rec.Message == msg {
				c++
				last = rec
			}
		}
		return c >= n
	})
	return last
}

// WaitUntil waits until done, called with every record so far, returns
// true; it fails the test after Wait, saying what was awaited.
func (r *Recorder) WaitUntil(t testing.TB, what string, done func([]slog.Record) bool) {
	t.Helper()
	timeout := time.After(Wait)
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if done(r.Records("")) {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			var msgs []string
			for _, rec := range r.Records("") {
				msgs = append(msgs, rec.Message)
			}
			t.Fatalf("waited in vain for %s; log: %q", what, msgs)
		}
	}
}

// Records returns the records whose message is msg, or all records when
// msg is empty.
func (r *Recorder) Records(msg string) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.records {
		if msg == "" || rec.Message == msg {
			out = append(out, rec)
		}
	}
	return out
}

// Count returns how many records have message msg.
func (r *Recorder) Count(msg string) int { return len(r.Records(msg)) }

// CountLevel returns how many records have the given level.
func (r *Recorder) CountLevel(level slog.Level) int {
	c := 0
	for _, rec := range r.Records("") {
		if rec.Level == level {
			c++
		}
	}
	return c
}

// Attr returns the string value of rec's attribute key, or "".
func Attr(rec slog.Record, key string) string {
	var v string
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

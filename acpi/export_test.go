package acpi

import "time"

// Tuning holds the settings of a Config that only tests change: on a host
// the defaults are what is needed, so they are not exported.
type Tuning struct {
	// DedupeWindow is how long after a press that gave a notice further
	// presses are dropped; zero means 2 s, and a negative value turns
	// deduplication off, so that every report is a notice.
	DedupeWindow time.Duration
	// Backoff and MaxBackoff bound the wait before reconnecting to acpid
	// or re-subscribing to netlink; zero means 100 ms and 5 s.
	Backoff, MaxBackoff time.Duration
}

// Tune returns c with the settings of t.
func Tune(c Config, t Tuning) Config {
	c.dedupeWindow, c.backoff, c.maxBackoff = t.DedupeWindow, t.Backoff, t.MaxBackoff
	return c
}

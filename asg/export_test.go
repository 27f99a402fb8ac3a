package asg

import "time"

// WithBackoffBase sets the first wait before a call is tried again inside
// a hold.
func WithBackoffBase(c Config, d time.Duration) Config {
	c.backoffBase = d
	return c
}

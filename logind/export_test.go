package logind

import "time"

// Fast returns c with the reconnect backoff cut to what a test waits for.
func Fast(c Config, backoff, maxBackoff time.Duration) Config {
	c.backoff, c.maxBackoff = backoff, maxBackoff
	return c
}

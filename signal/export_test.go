package signal

import "time"

// FastRetry returns c with the lookup's retry backoff cut to what a test
// waits for.
func FastRetry(c Config, retry, maxRetry time.Duration) Config {
	c.retry, c.maxRetry = retry, maxRetry
	return c
}

// ParseStopTimeout is parseStopTimeout, for the tests.
var ParseStopTimeout = parseStopTimeout

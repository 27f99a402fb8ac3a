package asg

import (
	"time"

	"github.com/termsig/termsig/imds"
)

type imdsConfig = imds.Config

// WithBackoffBase sets the first wait before a call is tried again inside
// a hold.
func WithBackoffBase(c Config, d time.Duration) Config {
	c.backoffBase = d
	return c
}

func imdsAt(endpoint string) (c imdsConfig) {
	c.Endpoint = endpoint
	return c
}

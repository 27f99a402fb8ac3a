package registry

import "time"

// NewServerWithClock is NewServer with a clock, so that tests can let
// leases lapse without waiting.
func NewServerWithClock(statePath string, cfg *Config, now func() time.Time) (*Server, error) {
	return newServer(statePath, cfg, now)
}

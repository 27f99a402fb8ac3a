package imds

import (
	"context"
	"net"
	"time"
)

// WithDNSDial returns c with the DNS server of its own client's lookups
// dialled by dial, so that a test can give the source a DNS server of its
// own, such as one that never answers.
func WithDNSDial(c Config, dial func(ctx context.Context, network, address string) (net.Conn, error)) Config {
	c.dnsDial = dial
	return c
}

// WithFastInterval returns c polling the urgent paths every d while
// advice holds.
func WithFastInterval(c Config, d time.Duration) Config {
	c.fastInterval = d
	return c
}

// WithMaintenanceInterval returns c polling the scheduled events every d.
func WithMaintenanceInterval(c Config, d time.Duration) Config {
	c.maintenanceInterval = d
	return c
}

// The defaults of the intervals that are no knob.
const (
	DefaultFastInterval        = defaultFastInterval
	DefaultMaintenanceInterval = defaultMaintenanceInterval
)

package azure

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

// WithNameInterval returns c with the VM's name, until an event confirms
// it, read again every d instead of every 10 minutes.
func WithNameInterval(c Config, d time.Duration) Config {
	c.nameInterval = d
	return c
}

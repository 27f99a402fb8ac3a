package alibaba

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

// WithTokenRetry returns c asking for a token again d after a token
// request failed, instead of a minute.
func WithTokenRetry(c Config, d time.Duration) Config {
	c.tokenRetry = d
	return c
}

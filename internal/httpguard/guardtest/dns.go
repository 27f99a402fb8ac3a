// Package guardtest has what the tests of the sources need to check that
// their transports end DNS lookups with the request: a DNS server that
// never answers.
package guardtest

import (
	"context"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"
)

// SilentDNS returns a dial to a DNS server on loopback that never
// answers, for Go's resolver, and a function that waits (at most wait)
// until it has had a query. The server closes when the test ends.
//
// It skips the test where httpguard.NewTransport leaves lookups to the
// system's resolver (all but Linux), which takes no dial.
func SilentDNS(t testing.TB, wait time.Duration) (dial func(ctx context.Context, network, address string) (net.Conn, error), queried func()) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("lookups go to the system's resolver here, which takes no DNS server of the test's")
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
		if network != "udp" {
			return nil, errors.New("silent DNS: " + network + " not served")
		}
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}
	queried = func() {
		t.Helper()
		if err := pc.SetReadDeadline(time.Now().Add(wait)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := pc.ReadFrom(make([]byte, 512)); err != nil {
			t.Fatalf("no DNS query: %v", err)
		}
	}
	return dial, queried
}

package azure

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/httpguard/guardtest"
	"github.com/termsig/termsig/internal/timing"
)

// Release's DNS lookups end with its context: with a DNS server that
// never answers, Release returns when ctx ends and leaves no lookup
// behind. The source is given the event directly, as a Watch would have,
// since a Watch could not have looked the name up either.
func TestReleaseEndsDNSLookups(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		dial, queried := guardtest.SilentDNS(t, 5*time.Second)
		s := New(Config{Endpoint: "http://metadata.termsig.test", Logger: slog.New(slog.DiscardHandler), RequestTimeout: time.Hour, dnsDial: dial})
		s.current, s.acked = map[string]tracked{"e": {gen: 1}}, map[string]uint64{}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Release(ctx, termsig.Notice{Source: Name, Kind: termsig.Terminate, Event: "e"}) }()
		queried()
		begin := time.Now()
		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(5 * time.Second):
			t.Fatal("Release did not return")
		}
		return time.Since(begin)
	})
}

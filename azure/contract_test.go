package azure_test

import (
	"log/slog"
	"testing"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/termsigtest"
)

func TestSourceKeepsContract(t *testing.T) {
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		srv := azuretest.NewServer()
		t.Cleanup(srv.Close)
		cfg := fast(srv)
		cfg.Logger = slog.New(slog.DiscardHandler)
		return azure.New(cfg), func() {
			srv.SetEvents(azuretest.Event{EventID: "preempt-1", EventType: "Preempt", NotBefore: notBefore})
		}
	})
}

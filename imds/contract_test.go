package imds_test

import (
	"log/slog"
	"testing"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/termsigtest"
)

// The source keeps the contract of termsig.Source against a fake IMDS,
// with a spot interruption as its notice.
func TestSourceKeepsContract(t *testing.T) {
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		srv := imdstest.NewServer()
		t.Cleanup(srv.Close)
		cfg := fastConfig(srv)
		cfg.Logger = slog.New(slog.DiscardHandler)
		return imds.New(cfg), func() { srv.SetInterruption("terminate", deadline) }
	})
}

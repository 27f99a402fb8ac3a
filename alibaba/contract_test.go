package alibaba_test

import (
	"log/slog"
	"testing"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/termsigtest"
)

// The source keeps the contract of termsig.Source against the fake, with
// a termination time as its notice.
func TestSourceKeepsContract(t *testing.T) {
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		srv := alibabatest.NewServer()
		t.Cleanup(srv.Close)
		cfg := fast(srv)
		cfg.Logger = slog.New(slog.DiscardHandler)
		return alibaba.New(cfg), func() { srv.SetTerminationTime(deadline) }
	})
}

package logind_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
	"github.com/termsig/termsig/termsigtest"
)

// The source keeps the contract of termsig.Source, on a private bus with
// a fake logind. logind's PrepareForShutdown(true) is its notice.
func TestSourceKeepsContract(t *testing.T) {
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		bus := startBus(t)
		fake := startLogind(t, bus, logindtest.Config{})
		src := logind.New(logind.Config{Address: bus.Address(), Logger: slog.New(slog.DiscardHandler)})
		return src, func() { require.NoError(t, fake.PrepareForShutdown("poweroff")) }
	})
}

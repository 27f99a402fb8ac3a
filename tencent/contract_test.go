package tencent_test

import (
	"testing"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/tencent"
	"github.com/termsig/termsig/tencent/tencenttest"
	"github.com/termsig/termsig/termsigtest"
)

// The source keeps the contract of termsig.Source against the fake.
func TestSourceKeepsContract(t *testing.T) {
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		srv := tencenttest.NewServer()
		t.Cleanup(srv.Close)
		return tencent.New(fast(srv)), func() { srv.SetTerminationTime(deadline) }
	})
}

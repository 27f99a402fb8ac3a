package termsig_test

import (
	"testing"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/termsigtest"
)

// BenchmarkFakeSendToReceive measures one notice from Fake.Send to its
// receipt on Notifier.C: the fake's queue, Run.Send's stamping and its
// hand-over to C, and the receive.
func BenchmarkFakeSendToReceive(b *testing.B) {
	f := termsigtest.NewFake("fake")
	n := termsig.New(f)
	defer n.Stop()
	nt := termsig.Notice{Kind: termsig.Terminate, Reason: "bench"}
	b.ReportAllocs()
	for b.Loop() {
		f.Send(nt)
		<-n.C()
	}
}

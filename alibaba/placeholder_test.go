package alibaba_test

import (
	"testing"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/termsigtest"
)

// "0001-01-01T00:00:00Z", what a Go server writes for an unset time, is
// no release time: no notice, and the real time that follows is sent.
func TestAZeroTimeIsNoNoticeAndHidesNoRealOne(t *testing.T) {
	h := start(t, nil, func(s *alibabatest.Server) {
		s.SetTerminationTime(deadline)
		s.Inject(termsigtest.Fault{Key: alibabatest.PathTerminationTime, Count: 1, Body: "0001-01-01T00:00:00Z"})
	})
	first := h.receive()
	h.polls(alibabatest.PathTerminationTime, 3)
	var got []termsig.Notice
	got = append(got, first)
	got = append(got, h.stop()...)
	for _, nt := range got {
		if nt.Kind == termsig.Terminate && nt.Deadline.Equal(deadline) {
			return
		}
	}
	t.Fatalf("the real deadline %v was never sent; notices: %v", deadline.Format(time.RFC3339), got)
}

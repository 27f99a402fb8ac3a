package tencent_test

import (
	"testing"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/tencent/tencenttest"
	"github.com/termsig/termsig/termsigtest"
)

// "1970-01-01 08:00:00", the Unix epoch written in UTC+8, is no reclaim
// time: no notice, and the real time that follows is sent.
func TestAnEpochTimeIsNoNoticeAndHidesNoRealOne(t *testing.T) {
	h := start(t, nil, func(s *tencenttest.Server) {
		s.SetTerminationTime(deadline)
		s.Inject(termsigtest.Fault{Key: tencenttest.PathTerminationTime, Count: 1, Body: "1970-01-01 08:00:00"})
	})
	got := []termsig.Notice{h.receive()}
	h.polls(3)
	got = append(got, h.stop()...)
	for _, nt := range got {
		if nt.Kind == termsig.Terminate && nt.Deadline.Equal(deadline) {
			return
		}
	}
	t.Fatalf("the real deadline %v was never sent; notices: %v", deadline.Format(time.RFC3339), got)
}

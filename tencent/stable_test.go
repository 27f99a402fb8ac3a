package tencent_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/tencent"
)

// An error page that names its request (a throttling front end), or a
// 200 page with a timestamp (a captive portal), changes the error's text
// on every poll unless the text leaves the body out: one "source error"
// line per outage, not per poll.
func TestAnErrorPageThatNamesItsRequestIsOneLinePerOutage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"429 with a request id", http.StatusTooManyRequests, `{"Code":"Throttling","RequestId":"%d"}`},
		{"portal 200 with a timestamp", http.StatusOK, `<html><!-- served %d --></html>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			ten := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := n.Add(1)
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, tc.body, i)
				if i == 10 {
					close(ten)
				}
			}))
			defer srv.Close()
			logs := testlog.New()
			nf := termsig.Config{Logger: logs.Logger()}.New(tencent.New(tencent.Config{
				Endpoint: srv.URL, Interval: tencent.FloorInterval, RequestTimeout: time.Second, MaxBackoff: 20 * time.Millisecond,
			}))
			select {
			case <-ten:
			case <-time.After(wait):
				t.Fatal("not polled ten times")
			}
			nf.Stop()
			assert.LessOrEqual(t, logs.Count(failing), 1, "one line per outage, not per poll (%d polls)", n.Load())
		})
	}
}

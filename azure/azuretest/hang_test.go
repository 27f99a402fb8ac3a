package azuretest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/termsigtest"
)

// The fake lets go of a hung request once its client gives up (Fault.Hang:
// "or until the client gives up"): InFlight drops back to zero and the
// request is counted, for an acknowledgement (POST, with a body) as for a
// poll.
func TestHangEndsWhenTheClientGivesUp(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			srv := azuretest.NewServer()
			defer srv.Close()
			key := azuretest.PathScheduledEvents
			if method == http.MethodPost {
				key = "POST"
			}
			srv.Inject(termsigtest.Fault{Key: key, Hang: true})
			c := client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			var body *strings.Reader
			if method == http.MethodPost {
				body = strings.NewReader(`{"StartRequests":[{"EventId":"e1"}]}`)
			} else {
				body = strings.NewReader("")
			}
			req, _ := http.NewRequestWithContext(ctx, method, srv.URL+azuretest.PathScheduledEvents+query, body)
			req.Header.Set("Metadata", "true")
			if res, err := c.Do(req); err == nil {
				res.Body.Close()
				t.Fatal("a hung request was answered")
			}
			await(t, srv, "the hung request let go", func() bool { return srv.InFlight() == 0 && srv.Requests(key) == 1 })
		})
	}
}

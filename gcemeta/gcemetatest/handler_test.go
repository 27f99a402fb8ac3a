package gcemetatest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/gcemeta/gcemetatest"
)

// A Server served on another listener through ServeHTTP answers long polls
// there when a value changes, and Close hangs up on those still waiting.
func TestServeHTTPServesTheFakeOnAnotherListener(t *testing.T) {
	srv := gcemetatest.NewServer()
	defer srv.Close()
	other := httptest.NewServer(srv)
	defer other.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	longPoll := func(key string) <-chan string {
		got := make(chan string, 1)
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, other.URL+"/computeMetadata/v1/"+key+"?wait_for_change=true&timeout_sec=60", nil)
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			req.Header.Set("Metadata-Flavor", "Google")
			res, err := hc.Do(req)
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			got <- string(b)
		}()
		return got
	}
	receive := func(c <-chan string) string {
		t.Helper()
		select {
		case s := <-c:
			return s
		case <-time.After(wait):
			t.Fatal("no answer to the long poll")
			return ""
		}
	}

	preempted := longPoll(gcemetatest.Preempted)
	require.NoError(t, srv.Await(ctx, func() bool { return srv.Waiting(gcemetatest.Preempted) == 1 }))
	srv.Set(gcemetatest.Preempted, "TRUE")
	assert.Equal(t, "TRUE", receive(preempted))

	maintenance := longPoll(gcemetatest.MaintenanceEvent)
	require.NoError(t, srv.Await(ctx, func() bool { return srv.Waiting(gcemetatest.MaintenanceEvent) == 1 }))
	srv.Close()
	assert.Contains(t, receive(maintenance), "error: ", "Close hangs up on the long poll")
}

package imdstest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/termsigtest"
)

// A Server served on another listener through ServeHTTP speaks the same
// IMDSv2, with the same state and counts, and Close still releases a
// request that a fault holds there.
func TestServeHTTPServesTheFakeOnAnotherListener(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	other := httptest.NewServer(srv)
	defer other.Close()
	c := client(t)
	md := other.URL + "/latest/meta-data/" + imdstest.PathInstanceAction

	status, _ := do(t, c, http.MethodGet, md, nil)
	assert.Equal(t, http.StatusUnauthorized, status, "tokens are required there too")
	status, tok := do(t, c, http.MethodPut, other.URL+"/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"})
	require.Equal(t, http.StatusOK, status)
	auth := map[string]string{"X-aws-ec2-metadata-token": tok}

	srv.SetInterruption("hibernate", time.Date(2026, 11, 30, 10, 2, 0, 0, time.UTC))
	status, body := do(t, c, http.MethodGet, md, auth)
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"action":"hibernate","time":"2026-11-30T10:02:00Z"}`, body)
	assert.Equal(t, 2, srv.Requests(imdstest.PathInstanceAction))

	// A connection of its own: net/http sends a GET again, once, when a
	// kept-alive connection is closed without an answer.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	srv.Inject(termsigtest.Fault{Key: imdstest.PathInstanceAction, Hang: true})
	errc := make(chan error, 1)
	go func() {
		res, err := fresh.Get(md)
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	await(t, srv, "a request held", func() bool { return srv.InFlight() == 1 })
	srv.Close()
	select {
	case err := <-errc:
		assert.Error(t, err, "the held request is hung up on")
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the request held on the other listener")
	}
}

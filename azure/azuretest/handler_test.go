package azuretest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/azure/azuretest"
)

// A Server served on another listener through ServeHTTP checks the
// Metadata header, serves the same document and VM name, and records and
// acts on the acknowledgements sent there.
func TestServeHTTPServesTheFakeOnAnotherListener(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	other := httptest.NewServer(srv)
	defer other.Close()
	c := client(t)
	url := other.URL + azuretest.PathScheduledEvents + query

	assert.Equal(t, http.StatusBadRequest, do(t, c, http.MethodGet, url, nil, "").status, "no Metadata header")
	srv.SetVMName("vm-7")
	srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Reboot", NotBefore: time.Now().Add(15 * time.Minute)})
	doc := do(t, c, http.MethodGet, url, metadata, "")
	require.Equal(t, http.StatusOK, doc.status)
	assert.Contains(t, doc.body, `"EventId":"e1"`)
	assert.Contains(t, doc.body, `"Resources":["vm-7"]`)
	name := do(t, c, http.MethodGet, other.URL+azuretest.PathVMName+query+"&format=text", metadata, "")
	assert.Equal(t, "vm-7", name.body)

	acked := do(t, c, http.MethodPost, url, metadata, `{"StartRequests":[{"EventId":"e1"}]}`)
	assert.Equal(t, http.StatusOK, acked.status)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	acks, err := srv.WaitStartRequests(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"e1"}, acks)
	assert.Equal(t, "Started", srv.Events()[0].EventStatus)
	assert.Equal(t, 1, requests(t, srv, "POST", 1))
}

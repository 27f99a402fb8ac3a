package tencenttest_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/tencent/tencenttest"
	"github.com/termsig/termsig/termsigtest"
)

// get sends method path to srv, and returns the status and body.
func get(t *testing.T, srv *tencenttest.Server, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	require.NoError(t, err)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

const termination = "/latest/meta-data/" + tencenttest.PathTerminationTime

// The termination time is 404 until it is set, then the time in UTC+8
// without a zone, as Tencent documents it, then 404 again once cleared.
func TestTerminationTimeIsChinaStandardTime(t *testing.T) {
	srv := tencenttest.NewServer()
	defer srv.Close()
	status, _ := get(t, srv, http.MethodGet, termination)
	assert.Equal(t, http.StatusNotFound, status)
	srv.SetTerminationTime(time.Date(2018, 8, 18, 4, 5, 33, 900, time.UTC))
	status, body := get(t, srv, http.MethodGet, termination)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "2018-08-18 12:05:33", body)
	srv.ClearTerminationTime()
	status, _ = get(t, srv, http.MethodGet, termination)
	assert.Equal(t, http.StatusNotFound, status)

	status, body = get(t, srv, http.MethodGet, "/latest/meta-data/"+tencenttest.PathInstanceID)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, tencenttest.InstanceID, body)
	status, _ = get(t, srv, http.MethodGet, "/latest/user-data")
	assert.Equal(t, http.StatusNotFound, status)
	status, _ = get(t, srv, http.MethodPut, termination)
	assert.Equal(t, http.StatusMethodNotAllowed, status)
	assert.Equal(t, 4, srv.Requests(tencenttest.PathTerminationTime))
	assert.Equal(t, 6, srv.Requests(""))
}

// A fault answers in the service's place, for Count requests.
func TestFaultsAnswerInTheServicesPlace(t *testing.T) {
	srv := tencenttest.NewServer()
	defer srv.Close()
	srv.Inject(termsigtest.Fault{Key: tencenttest.PathTerminationTime, Count: 1, Status: http.StatusServiceUnavailable})
	status, body := get(t, srv, http.MethodGet, termination)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "Service Unavailable", body)
	status, _ = get(t, srv, http.MethodGet, termination)
	assert.Equal(t, http.StatusNotFound, status, "the fault is used up")

	srv.Inject(termsigtest.Fault{Hang: true})
	done := make(chan int, 1)
	go func() {
		status, _ := get(t, srv, http.MethodGet, termination)
		done <- status
	}()
	for srv.InFlight() == 0 {
		select {
		case <-srv.Served():
		case <-time.After(5 * time.Second):
			t.Fatal("no request")
		}
	}
	srv.ClearFaults()
	select {
	case status := <-done:
		assert.Equal(t, http.StatusNotFound, status, "released, then served")
	case <-time.After(5 * time.Second):
		t.Fatal("not released")
	}
}

// Stop takes the service away, Start brings it back with its state, and
// AwaitRequests waits for a count.
func TestStopAndStart(t *testing.T) {
	srv := tencenttest.NewServer()
	defer srv.Close()
	srv.SetTerminationTime(time.Date(2018, 8, 18, 4, 5, 33, 0, time.UTC))
	srv.Stop()
	_, err := http.Get(srv.URL + termination)
	assert.Error(t, err)
	require.NoError(t, srv.Start())
	status, _ := get(t, srv, http.MethodGet, termination)
	assert.Equal(t, http.StatusOK, status)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	assert.NoError(t, srv.AwaitRequests(ctx, tencenttest.PathTerminationTime, 1))
	srv.Close()
	assert.Error(t, srv.Start(), "closed for good")
}

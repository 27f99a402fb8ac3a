package alibabatest_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/termsigtest"
)

// client is a client of one server, its connections closed when the test
// ends.
type client struct {
	t   *testing.T
	srv *alibabatest.Server
	hc  *http.Client
}

func newClient(t *testing.T) *client {
	srv := alibabatest.NewServer()
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, srv: srv, hc: &http.Client{Transport: tr}}
}

// do sends method path with header, and returns the status and body.
func (c *client) do(method, path string, header map[string]string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.srv.URL+path, nil)
	require.NoError(c.t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.hc.Do(req)
	require.NoError(c.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(c.t, err)
	return res.StatusCode, string(b)
}

// token gets a token for ttl seconds.
func (c *client) token(ttl int) string {
	c.t.Helper()
	status, tok := c.do(http.MethodPut, "/latest/api/token", map[string]string{"X-aliyun-ecs-metadata-token-ttl-seconds": strconv.Itoa(ttl)})
	require.Equal(c.t, http.StatusOK, status)
	require.NotEmpty(c.t, tok)
	return tok
}

const termination = "/latest/meta-data/" + alibabatest.PathTerminationTime

// Token requests, as Alibaba documents their answers.
func TestTokenRequests(t *testing.T) {
	c := newClient(t)
	ttl := "X-aliyun-ecs-metadata-token-ttl-seconds"
	for _, tc := range []struct {
		name   string
		method string
		header map[string]string
		want   int
	}{
		{"the longest ttl", http.MethodPut, map[string]string{ttl: "21600"}, http.StatusOK},
		{"one second", http.MethodPut, map[string]string{ttl: "1"}, http.StatusOK},
		{"ttl too long", http.MethodPut, map[string]string{ttl: "21700"}, http.StatusBadRequest},
		{"ttl zero", http.MethodPut, map[string]string{ttl: "0"}, http.StatusBadRequest},
		{"no ttl", http.MethodPut, nil, http.StatusBadRequest},
		{"forwarded", http.MethodPut, map[string]string{ttl: "60", "X-Forwarded-For": "www.example.com"}, http.StatusForbidden},
		{"GET", http.MethodGet, map[string]string{ttl: "60"}, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _ := c.do(tc.method, "/latest/api/token", tc.header)
			assert.Equal(t, tc.want, status)
		})
	}
	assert.Equal(t, 7, c.srv.Requests(alibabatest.KeyToken))
}

// Both modes, then the hardening mode only: a request without a token is
// answered, then refused with 403; one with an unknown token gets 401.
func TestModes(t *testing.T) {
	c := newClient(t)
	status, _ := c.do(http.MethodGet, termination, nil)
	assert.Equal(t, http.StatusNotFound, status, "normal mode: nothing scheduled")
	tok := c.token(60)
	status, _ = c.do(http.MethodGet, termination, map[string]string{"X-aliyun-ecs-metadata-token": tok})
	assert.Equal(t, http.StatusNotFound, status, "hardening mode: nothing scheduled")
	status, _ = c.do(http.MethodGet, termination, map[string]string{"X-aliyun-ecs-metadata-token": "aaa"})
	assert.Equal(t, http.StatusUnauthorized, status, "an invalid token")

	c.srv.SetTokensRequired(true)
	status, body := c.do(http.MethodGet, termination, nil)
	assert.Equal(t, http.StatusForbidden, status, "no token in the hardening mode only")
	assert.Equal(t, "Forbidden", body)
	status, _ = c.do(http.MethodGet, termination, map[string]string{"X-aliyun-ecs-metadata-token": tok})
	assert.Equal(t, http.StatusNotFound, status)

	c.srv.ExpireTokens()
	status, _ = c.do(http.MethodGet, termination, map[string]string{"X-aliyun-ecs-metadata-token": tok})
	assert.Equal(t, http.StatusUnauthorized, status, "a token forgotten by a restart")
}

// The termination time is 404 until it is set, then the time in UTC and
// whole seconds, then 404 again once cleared.
func TestTerminationTime(t *testing.T) {
	c := newClient(t)
	c.srv.SetTerminationTime(time.Date(2015, 1, 6, 2, 2, 0, 300, time.FixedZone("CST", 8*3600)))
	status, body := c.do(http.MethodGet, termination, nil)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "2015-01-05T18:02:00Z", body)
	c.srv.ClearTerminationTime()
	status, _ = c.do(http.MethodGet, termination, nil)
	assert.Equal(t, http.StatusNotFound, status)
	status, body = c.do(http.MethodGet, "/latest/meta-data/"+alibabatest.PathInstanceID, nil)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, alibabatest.InstanceID, body)
	status, _ = c.do(http.MethodGet, "/latest/meta-data/nothing-here", nil)
	assert.Equal(t, http.StatusNotFound, status)
	status, _ = c.do(http.MethodPost, termination, nil)
	assert.Equal(t, http.StatusMethodNotAllowed, status)
}

// A fault answers before the token is looked at, for its key only, and
// for Count requests.
func TestFaultsComeBeforeTheToken(t *testing.T) {
	c := newClient(t)
	c.srv.SetTokensRequired(true)
	c.srv.Inject(termsigtest.Fault{Key: alibabatest.PathTerminationTime, Count: 2, Body: "2015-01-05T18:02:00Z"})
	for range 2 {
		status, body := c.do(http.MethodGet, termination, nil)
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, "2015-01-05T18:02:00Z", body)
	}
	status, _ := c.do(http.MethodGet, termination, nil)
	assert.Equal(t, http.StatusForbidden, status, "the fault is used up")
	c.srv.Inject(termsigtest.Fault{Key: alibabatest.KeyToken, Status: http.StatusNotFound})
	status, _ = c.do(http.MethodPut, "/latest/api/token", map[string]string{"X-aliyun-ecs-metadata-token-ttl-seconds": "60"})
	assert.Equal(t, http.StatusNotFound, status)
	c.srv.ClearFaults()
	c.token(60)
}

// A request that a fault holds is released by ClearFaults (and served),
// and InFlight counts it meanwhile.
func TestAHangIsReleasedByClearFaults(t *testing.T) {
	c := newClient(t)
	c.srv.Inject(termsigtest.Fault{Hang: true})
	done := make(chan int, 1)
	go func() {
		status, _ := c.do(http.MethodGet, termination, nil)
		done <- status
	}()
	for c.srv.InFlight() == 0 {
		select {
		case <-c.srv.Served():
		case <-time.After(5 * time.Second):
			t.Fatal("no request")
		}
	}
	c.srv.ClearFaults()
	select {
	case status := <-done:
		assert.Equal(t, http.StatusNotFound, status)
	case <-time.After(5 * time.Second):
		t.Fatal("not released")
	}
}

// Stop takes the service away, Start brings it back with its state, and
// AwaitRequests waits for a count.
func TestStopAndStart(t *testing.T) {
	c := newClient(t)
	c.srv.SetTerminationTime(time.Date(2015, 1, 5, 18, 2, 0, 0, time.UTC))
	c.srv.Stop()
	_, err := c.hc.Get(c.srv.URL + termination)
	assert.Error(t, err)
	require.NoError(t, c.srv.Start())
	status, _ := c.do(http.MethodGet, termination, nil)
	assert.Equal(t, http.StatusOK, status)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	assert.NoError(t, c.srv.AwaitRequests(ctx, alibabatest.PathTerminationTime, 1))
	c.srv.Close()
	assert.Error(t, c.srv.Start(), "closed for good")
}

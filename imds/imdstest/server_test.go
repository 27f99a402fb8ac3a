package imdstest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/termsigtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func do(t *testing.T, c *http.Client, method, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestTokens(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	c := client(t)
	md := srv.URL + "/latest/meta-data/instance-id"

	status, _ := do(t, c, http.MethodGet, md, nil)
	assert.Equal(t, http.StatusUnauthorized, status, "IMDSv2: no token, no answer")

	for _, ttl := range []string{"", "0", "21601", "x"} {
		status, _ = do(t, c, http.MethodPut, srv.URL+"/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": ttl})
		assert.Equal(t, http.StatusBadRequest, status, "ttl %q", ttl)
	}
	status, _ = do(t, c, http.MethodPut, srv.URL+"/latest/api/token", map[string]string{
		"X-aws-ec2-metadata-token-ttl-seconds": "60", "X-Forwarded-For": "10.0.0.1",
	})
	assert.Equal(t, http.StatusForbidden, status)
	status, _ = do(t, c, http.MethodGet, srv.URL+"/latest/api/token", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, status)

	status, tok := do(t, c, http.MethodPut, srv.URL+"/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"})
	require.Equal(t, http.StatusOK, status)
	auth := map[string]string{"X-aws-ec2-metadata-token": tok}
	status, body := do(t, c, http.MethodGet, md, auth)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "i-0123456789abcdef0", body)

	status, _ = do(t, c, http.MethodGet, md, map[string]string{"X-aws-ec2-metadata-token": "forged"})
	assert.Equal(t, http.StatusUnauthorized, status)

	srv.ExpireTokens()
	status, _ = do(t, c, http.MethodGet, md, auth)
	assert.Equal(t, http.StatusUnauthorized, status)

	srv.SetTokensOptional(true)
	status, _ = do(t, c, http.MethodGet, md, nil)
	assert.Equal(t, http.StatusOK, status, "IMDSv1 allowed")
	assert.Equal(t, 5, requests(t, srv, "instance-id", 5), "every answered request is counted")
}

func TestStateAndFaults(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	srv.SetTokensOptional(true)
	c := client(t)
	get := func(path string) (int, string) {
		return do(t, c, http.MethodGet, srv.URL+"/latest/meta-data/"+path, nil)
	}

	for _, p := range []string{imdstest.PathInstanceAction, imdstest.PathTerminationTime, imdstest.PathRebalance, imdstest.PathLifecycle, "no/such/path"} {
		status, _ := get(p)
		assert.Equal(t, http.StatusNotFound, status, p)
	}
	status, body := get(imdstest.PathScheduled)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "[]", body)

	at := time.Date(2026, 11, 30, 10, 2, 0, 0, time.UTC)
	srv.SetInterruption("stop", at)
	_, body = get(imdstest.PathInstanceAction)
	assert.JSONEq(t, `{"action":"stop","time":"2026-11-30T10:02:00Z"}`, body)
	_, body = get(imdstest.PathTerminationTime)
	assert.Equal(t, "2026-11-30T10:02:00Z", body)

	srv.SetInterruption("terminate", time.Time{})
	_, body = get(imdstest.PathInstanceAction)
	assert.Contains(t, body, time.Now().UTC().Add(2*time.Minute).Format("2006-01-02T15:04"), "recomputed as now + 2 min")

	srv.SetScheduledEvents(imdstest.ScheduledEvent{Code: "system-reboot", Description: "d", EventID: "e1", NotBefore: at})
	_, body = get(imdstest.PathScheduled)
	assert.JSONEq(t, `[{"Code":"system-reboot","Description":"d","EventId":"e1","NotBefore":"30 Nov 2026 10:02:00 GMT","State":"active"}]`, body)

	srv.SetLifecycleState("InService")
	_, body = get(imdstest.PathLifecycle)
	assert.Equal(t, "InService", body)

	srv.Inject(termsigtest.Fault{Count: 2, Status: http.StatusServiceUnavailable})
	status, _ = get(imdstest.PathLifecycle)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	status, _ = get(imdstest.PathLifecycle)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	status, _ = get(imdstest.PathLifecycle)
	assert.Equal(t, http.StatusOK, status)

	srv.Inject(termsigtest.Fault{Key: imdstest.PathLifecycle, Body: "<html>"})
	_, body = get(imdstest.PathLifecycle)
	assert.Equal(t, "<html>", body)
	srv.ClearFaults()
	_, body = get(imdstest.PathLifecycle)
	assert.Equal(t, "InService", body)
}

func TestStopStart(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	srv.SetTokensOptional(true)
	srv.SetLifecycleState("InService")
	c := client(t)
	url := srv.URL + "/latest/meta-data/" + imdstest.PathLifecycle
	status, _ := do(t, c, http.MethodGet, url, nil) // leaves a keep-alive connection
	require.Equal(t, http.StatusOK, status)

	srv.Stop()
	srv.Stop() // twice is fine
	_, err := c.Get(url)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset"), err.Error())

	require.NoError(t, srv.Start())
	status, body := do(t, c, http.MethodGet, url, nil)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "InService", body, "state survives")

	srv.Close()
	assert.Error(t, srv.Start())
}

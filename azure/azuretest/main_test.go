package azuretest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/azure/azuretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 5 * time.Second

// query is what a client of scheduled events puts after the path.
const query = "?api-version=2020-07-01"

// metadata is the header every request to IMDS carries.
var metadata = map[string]string{"Metadata": "true"}

type answer struct {
	status int
	body   string
	hdr    http.Header
}

func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// do sends a request with the headers hdr and, if not empty, body, and
// returns the whole answer.
func do(t *testing.T, c *http.Client, method, url string, hdr map[string]string, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return answer{res.StatusCode, string(b), res.Header}
}

// get GETs the document as a client does.
func get(t *testing.T, c *http.Client, srv *azuretest.Server) answer {
	t.Helper()
	return do(t, c, http.MethodGet, srv.URL+azuretest.PathScheduledEvents+query, metadata, "")
}

// ack POSTs an acknowledgement body as a client does.
func ack(t *testing.T, c *http.Client, srv *azuretest.Server, body string) answer {
	t.Helper()
	return do(t, c, http.MethodPost, srv.URL+azuretest.PathScheduledEvents+query, metadata, body)
}

// getAsync GETs the document in a goroutine; the channel gets its status,
// or 0 if the request failed.
func getAsync(c *http.Client, srv *azuretest.Server) <-chan int {
	done := make(chan int, 1)
	go func() {
		req, err := http.NewRequest(http.MethodGet, srv.URL+azuretest.PathScheduledEvents+query, nil)
		if err != nil {
			done <- 0
			return
		}
		req.Header.Set("Metadata", "true")
		res, err := c.Do(req)
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		done <- res.StatusCode
	}()
	return done
}

// recv returns what c gets, failing the test if nothing comes in time.
func recv(t *testing.T, c <-chan int) int {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(wait):
		t.Fatal("no answer")
		return 0
	}
}

// await waits until cond holds, looking again whenever a request arrives
// or is answered.
func await(t *testing.T, srv *azuretest.Server, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(wait)
	for {
		served := srv.Served()
		if cond() {
			return
		}
		select {
		case <-served:
		case <-timeout:
			t.Fatal("waited in vain for " + what)
		}
	}
}

// inFlight waits until the server is answering n requests.
func inFlight(t *testing.T, srv *azuretest.Server, n int) {
	t.Helper()
	await(t, srv, "requests in flight", func() bool { return srv.InFlight() >= n })
}

// requests waits until srv.Requests(path) is at least want, and returns
// it: a request is counted once its handler returns, which can be after
// its client has had the answer.
func requests(t *testing.T, srv *azuretest.Server, path string, want int) int {
	t.Helper()
	await(t, srv, path+" requests", func() bool { return srv.Requests(path) >= want })
	return srv.Requests(path)
}

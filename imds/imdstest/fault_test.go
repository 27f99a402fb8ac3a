package imdstest_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/termsigtest"
)

// What one request gets from each kind of fault, and what the next gets.
func TestFaultAnswers(t *testing.T) {
	type answer struct {
		status int
		body   string
	}
	ok := answer{http.StatusOK, "InService"}
	for _, tc := range []struct {
		name   string
		faults []termsigtest.Fault
		want   []answer // for successive requests for PathLifecycle
	}{
		{"status with its text", []termsigtest.Fault{{Count: 1, Status: http.StatusTooManyRequests}},
			[]answer{{http.StatusTooManyRequests, "Too Many Requests"}, ok}},
		{"status and body", []termsigtest.Fault{{Count: 1, Status: http.StatusInternalServerError, Body: "<html>oops</html>"}},
			[]answer{{http.StatusInternalServerError, "<html>oops</html>"}, ok}},
		{"body is a 200", []termsigtest.Fault{{Count: 1, Body: "<html>"}},
			[]answer{{http.StatusOK, "<html>"}, ok}},
		{"empty 200", []termsigtest.Fault{{Count: 1, Status: http.StatusOK}},
			[]answer{{http.StatusOK, ""}, ok}},
		{"until cleared", []termsigtest.Fault{{Status: http.StatusServiceUnavailable}},
			[]answer{{http.StatusServiceUnavailable, "Service Unavailable"}, {http.StatusServiceUnavailable, "Service Unavailable"}}},
		{"in the order injected", []termsigtest.Fault{{Count: 2, Status: http.StatusServiceUnavailable}, {Count: 1, Body: "x"}},
			[]answer{{http.StatusServiceUnavailable, "Service Unavailable"}, {http.StatusServiceUnavailable, "Service Unavailable"}, {http.StatusOK, "x"}, ok}},
		{"other key", []termsigtest.Fault{{Key: imdstest.PathInstanceAction, Status: http.StatusServiceUnavailable}},
			[]answer{ok, ok}},
		{"own key", []termsigtest.Fault{{Key: imdstest.PathLifecycle, Count: 1, Status: http.StatusServiceUnavailable}},
			[]answer{{http.StatusServiceUnavailable, "Service Unavailable"}, ok}},
		{"delay, then status", []termsigtest.Fault{{Count: 1, Delay: 10 * time.Millisecond, Status: http.StatusServiceUnavailable}},
			[]answer{{http.StatusServiceUnavailable, "Service Unavailable"}, ok}},
		{"nothing set lets it through", []termsigtest.Fault{{Count: 1}, {Count: 1, Body: "x"}},
			[]answer{ok, {http.StatusOK, "x"}, ok}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := imdstest.NewServer()
			defer srv.Close()
			srv.SetTokensOptional(true)
			srv.SetLifecycleState("InService")
			for _, f := range tc.faults {
				srv.Inject(f)
			}
			c := client(t)
			for i, want := range tc.want {
				status, body := do(t, c, http.MethodGet, srv.URL+"/latest/meta-data/"+imdstest.PathLifecycle, nil)
				assert.Equal(t, want, answer{status, body}, "request %d", i+1)
			}
		})
	}
}

// A fault applies before the token is looked at, and "api/token" limits
// it to token requests.
func TestFaultOnTokens(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	c := client(t)
	srv.Inject(termsigtest.Fault{Key: "api/token", Count: 1, Status: http.StatusServiceUnavailable})
	ttl := map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"}
	status, _ := do(t, c, http.MethodPut, srv.URL+"/latest/api/token", ttl)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	status, _ = do(t, c, http.MethodPut, srv.URL+"/latest/api/token", ttl)
	assert.Equal(t, http.StatusOK, status)

	srv.Inject(termsigtest.Fault{Key: imdstest.PathInstanceID, Count: 1, Body: "i-fault"})
	status, body := do(t, c, http.MethodGet, srv.URL+"/latest/meta-data/"+imdstest.PathInstanceID, nil)
	assert.Equal(t, http.StatusOK, status, "the fault answers in IMDS's place, token or not")
	assert.Equal(t, "i-fault", body)
}

// BodySize streams that much filler, on token requests too; EndlessBody
// never ends.
func TestFaultBodySize(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	c := client(t)
	srv.Inject(termsigtest.Fault{Key: "api/token", BodySize: 2<<20 + 1, Count: 1})
	status, body := do(t, c, http.MethodPut, srv.URL+"/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"})
	assert.Equal(t, http.StatusOK, status)
	assert.Len(t, body, 2<<20+1)

	srv.Inject(termsigtest.Fault{Key: imdstest.PathInstanceAction, BodySize: termsigtest.EndlessBody, Status: http.StatusNotFound})
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/latest/meta-data/"+imdstest.PathInstanceAction, nil)
	require.NoError(t, err)
	res, err := c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusNotFound, res.StatusCode, "before the token is looked at")
	n, err := io.CopyN(io.Discard, res.Body, 4<<20)
	require.NoError(t, err, "still going")
	assert.Equal(t, int64(4<<20), n)
	inFlight(t, srv)
	srv.Stop()
	_, err = io.Copy(io.Discard, res.Body)
	assert.Error(t, err, "cut off by Stop")
}

func TestFaultDrop(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	srv.SetTokensOptional(true)
	srv.Inject(termsigtest.Fault{Count: 1, Drop: true})
	c := client(t)
	url := srv.URL + "/latest/meta-data/" + imdstest.PathInstanceID
	_, err := c.Get(url)
	require.Error(t, err, "no answer")
	status, _ := do(t, c, http.MethodGet, url, nil)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, 2, requests(t, srv, imdstest.PathInstanceID, 2))
}

// getAsync requests path in a goroutine; the channel gets its status, or
// 0 if the request failed.
func getAsync(c *http.Client, url string) <-chan int {
	done := make(chan int, 1)
	go func() {
		res, err := c.Get(url)
		if err != nil {
			done <- 0
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	return done
}

// await waits until cond holds, looking again whenever a request arrives
// or is answered.
func await(t *testing.T, srv *imdstest.Server, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(5 * time.Second)
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

// inFlight waits until the server is answering a request.
func inFlight(t *testing.T, srv *imdstest.Server) {
	t.Helper()
	await(t, srv, "a request in flight", func() bool { return srv.InFlight() > 0 })
}

// requests waits until srv.Requests(path) is at least want, and returns
// it: a request is counted once its handler returns, which can be after
// its client has had the answer.
func requests(t *testing.T, srv *imdstest.Server, path string, want int) int {
	t.Helper()
	await(t, srv, path+" requests", func() bool { return srv.Requests(path) >= want })
	return srv.Requests(path)
}

// A request held by Hang or Delay is let go by ClearFaults (Hang only:
// then it is served), Stop and Close (its connection closed).
func TestFaultHeld(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   termsigtest.Fault
		release func(*imdstest.Server)
		want    int // status; 0: no answer
	}{
		{"hang, ClearFaults", termsigtest.Fault{Hang: true}, (*imdstest.Server).ClearFaults, http.StatusOK},
		{"hang, Stop", termsigtest.Fault{Hang: true}, (*imdstest.Server).Stop, 0},
		{"hang, Close", termsigtest.Fault{Hang: true}, (*imdstest.Server).Close, 0},
		{"delay, Stop", termsigtest.Fault{Delay: time.Hour}, (*imdstest.Server).Stop, 0},
		{"delay, Close", termsigtest.Fault{Delay: time.Hour}, (*imdstest.Server).Close, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := imdstest.NewServer()
			defer srv.Close()
			srv.SetTokensOptional(true)
			srv.Inject(tc.fault)
			got := getAsync(client(t), srv.URL+"/latest/meta-data/"+imdstest.PathInstanceID)
			inFlight(t, srv)
			select {
			case <-got:
				t.Fatal("a held request was answered")
			default:
			}
			tc.release(srv)
			select {
			case status := <-got:
				assert.Equal(t, tc.want, status)
			case <-time.After(5 * time.Second):
				t.Fatal("the held request was not let go")
			}
		})
	}
}

package azuretest_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/termsigtest"
)

// What one request gets from each kind of fault, and what the next gets.
func TestFaultAnswers(t *testing.T) {
	type reply struct {
		status int
		body   string
	}
	const doc = `{"DocumentIncarnation":1,"Events":[]}`
	ok := reply{http.StatusOK, doc}
	unavailable := reply{http.StatusServiceUnavailable, "Service Unavailable"}
	for _, tc := range []struct {
		name   string
		faults []termsigtest.Fault
		want   []reply // for successive GETs of the document
	}{
		{"a burst of 503", []termsigtest.Fault{{Count: 3, Status: http.StatusServiceUnavailable}},
			[]reply{unavailable, unavailable, unavailable, ok}},
		{"until cleared", []termsigtest.Fault{{Status: http.StatusServiceUnavailable}},
			[]reply{unavailable, unavailable, unavailable}},
		{"status and body", []termsigtest.Fault{{Count: 1, Status: http.StatusTooManyRequests, Body: `{"error":"Too many requests"}`}},
			[]reply{{http.StatusTooManyRequests, `{"error":"Too many requests"}`}, ok}},
		{"truncated body", []termsigtest.Fault{{Count: 1, Body: `{"DocumentIncarnation":1,"Ev`}},
			[]reply{{http.StatusOK, `{"DocumentIncarnation":1,"Ev`}, ok}},
		{"empty 200", []termsigtest.Fault{{Count: 1, Status: http.StatusOK}},
			[]reply{{http.StatusOK, ""}, ok}},
		{"in the order injected", []termsigtest.Fault{{Count: 2, Status: http.StatusServiceUnavailable}, {Count: 1, Body: "<html>"}},
			[]reply{unavailable, unavailable, {http.StatusOK, "<html>"}, ok}},
		{"other key", []termsigtest.Fault{{Key: azuretest.PathVMName, Status: http.StatusServiceUnavailable}, {Key: "POST", Status: http.StatusServiceUnavailable}},
			[]reply{ok, ok}},
		{"own key", []termsigtest.Fault{{Key: azuretest.PathScheduledEvents, Count: 1, Status: http.StatusServiceUnavailable}},
			[]reply{unavailable, ok}},
		{"delay, then status", []termsigtest.Fault{{Count: 1, Delay: 10 * time.Millisecond, Status: http.StatusServiceUnavailable}},
			[]reply{unavailable, ok}},
		{"nothing set lets it through", []termsigtest.Fault{{Count: 1}, {Count: 1, Body: "x"}},
			[]reply{ok, {http.StatusOK, "x"}, ok}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := azuretest.NewServer()
			defer srv.Close()
			for _, f := range tc.faults {
				srv.Inject(f)
			}
			c := client(t)
			for i, want := range tc.want {
				a := get(t, c, srv)
				assert.Equal(t, want, reply{a.status, a.body}, "request %d", i+1)
			}
		})
	}
}

// A fault applies before the Metadata header is looked at, and "POST"
// limits it to acknowledgements.
func TestFaultBeforeChecks(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Reboot"})
	c := client(t)
	url := srv.URL + azuretest.PathScheduledEvents + query

	srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Count: 1, Body: "from a proxy"})
	a := do(t, c, http.MethodGet, url, nil, "")
	assert.Equal(t, http.StatusOK, a.status, "the fault answers in IMDS's place, header or not")
	assert.Equal(t, "from a proxy", a.body)

	srv.Inject(termsigtest.Fault{Key: "POST", Count: 1, Status: http.StatusInternalServerError})
	a = ack(t, c, srv, `{"StartRequests":[{"EventId":"e1"}]}`)
	assert.Equal(t, http.StatusInternalServerError, a.status)
	assert.Empty(t, srv.StartRequests(), "a lost acknowledgement")
	assert.Equal(t, http.StatusOK, get(t, c, srv).status, "polls untouched")
	a = ack(t, c, srv, `{"StartRequests":[{"EventId":"e1"}]}`)
	assert.Equal(t, http.StatusOK, a.status)
	assert.Equal(t, []string{"e1"}, srv.StartRequests())

	srv.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Count: 1, Status: http.StatusNotFound})
	a = do(t, c, http.MethodGet, srv.URL+azuretest.PathVMName+"?api-version=2021-02-01&format=text", metadata, "")
	assert.Equal(t, http.StatusNotFound, a.status)
}

// BodySize streams that much filler; EndlessBody never ends, until Stop.
func TestFaultBodySize(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	c := client(t)
	srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, BodySize: 2<<20 + 1, Count: 1})
	a := get(t, c, srv)
	assert.Equal(t, http.StatusOK, a.status)
	assert.Len(t, a.body, 2<<20+1)

	srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, BodySize: termsigtest.EndlessBody})
	req, err := http.NewRequest(http.MethodGet, srv.URL+azuretest.PathScheduledEvents+query, nil)
	require.NoError(t, err)
	req.Header.Set("Metadata", "true")
	res, err := c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	n, err := io.CopyN(io.Discard, res.Body, 4<<20) // a bounded prefix
	require.NoError(t, err, "still going")
	assert.Equal(t, int64(4<<20), n)
	inFlight(t, srv, 1)
	srv.Stop()
	_, err = io.Copy(io.Discard, res.Body)
	assert.Error(t, err, "cut off by Stop")
}

func TestFaultDrop(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	srv.Inject(termsigtest.Fault{Count: 1, Drop: true})
	c := client(t)
	assert.Equal(t, 0, recv(t, getAsync(c, srv)), "no answer")
	assert.Equal(t, http.StatusOK, get(t, c, srv).status)
	assert.Equal(t, 2, requests(t, srv, azuretest.PathScheduledEvents, 2))
}

// A request held by Hang or Delay is let go by ClearFaults (Hang only:
// then it is served), Stop and Close (its connection closed).
func TestFaultHeld(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   termsigtest.Fault
		release func(*azuretest.Server)
		want    int // status; 0: no answer
	}{
		{"hang, ClearFaults", termsigtest.Fault{Hang: true}, (*azuretest.Server).ClearFaults, http.StatusOK},
		{"hang, Stop", termsigtest.Fault{Hang: true}, (*azuretest.Server).Stop, 0},
		{"hang, Close", termsigtest.Fault{Hang: true}, (*azuretest.Server).Close, 0},
		{"delay, Stop", termsigtest.Fault{Delay: time.Hour}, (*azuretest.Server).Stop, 0},
		{"delay, Close", termsigtest.Fault{Delay: time.Hour}, (*azuretest.Server).Close, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := azuretest.NewServer()
			defer srv.Close()
			srv.Inject(tc.fault)
			got := getAsync(client(t), srv)
			inFlight(t, srv, 1)
			select {
			case <-got:
				t.Fatal("a held request was answered")
			default:
			}
			tc.release(srv)
			assert.Equal(t, tc.want, recv(t, got))
		})
	}
}

// A request that ClearFaults lets go is served as any other: refused
// without its Metadata header.
func TestFaultHangReleasedIsChecked(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	srv.Inject(termsigtest.Fault{Hang: true})
	c := client(t)
	got := make(chan answer, 1)
	go func() {
		res, err := c.Get(srv.URL + azuretest.PathScheduledEvents + query) // no Metadata header
		if err != nil {
			got <- answer{}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got <- answer{status: res.StatusCode, body: string(b)}
	}()
	inFlight(t, srv, 1)
	srv.ClearFaults()
	select {
	case a := <-got:
		assert.Equal(t, http.StatusBadRequest, a.status)
		assert.Contains(t, a.body, "metadata header")
	case <-time.After(wait):
		t.Fatal("not let go")
	}
}

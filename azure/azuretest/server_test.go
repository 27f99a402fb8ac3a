package azuretest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/azure/azuretest"
)

// As in Azure's documentation: Mon, 19 Sep 2016 18:29:47 GMT.
var notBefore = time.Date(2016, 9, 19, 18, 29, 47, 0, time.UTC)

func TestDocument(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	c := client(t)

	a := get(t, c, srv)
	assert.Equal(t, http.StatusOK, a.status)
	assert.True(t, strings.HasPrefix(a.hdr.Get("Content-Type"), "application/json"), a.hdr.Get("Content-Type"))
	assert.JSONEq(t, `{"DocumentIncarnation":1,"Events":[]}`, a.body, "no events: an empty list, not null")

	srv.SetEvents(
		azuretest.Event{
			EventID:           "f020ba2e-3bc0-4c40-a10b-86575a9eabd5",
			EventType:         "Freeze",
			ResourceType:      "VirtualMachine",
			Resources:         []string{"FrontEnd_IN_0", "BackEnd_IN_0"},
			EventStatus:       "Scheduled",
			NotBefore:         notBefore.In(time.FixedZone("CEST", 2*3600)), // sent in GMT all the same
			Description:       "Host server is undergoing maintenance.",
			EventSource:       "User",
			DurationInSeconds: 9,
		},
		azuretest.Event{EventID: "e2", EventType: "Preempt"}, // the defaults
		azuretest.Event{EventID: "e3", EventType: "Whatever", Resources: []string{}},
	)
	a = get(t, c, srv)
	assert.Equal(t, http.StatusOK, a.status)
	assert.JSONEq(t, `{"DocumentIncarnation":2,"Events":[
		{"EventId":"f020ba2e-3bc0-4c40-a10b-86575a9eabd5","EventType":"Freeze","ResourceType":"VirtualMachine",
		 "Resources":["FrontEnd_IN_0","BackEnd_IN_0"],"EventStatus":"Scheduled","NotBefore":"Mon, 19 Sep 2016 18:29:47 GMT",
		 "Description":"Host server is undergoing maintenance.","EventSource":"User","DurationInSeconds":9},
		{"EventId":"e2","EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["test-vm"],
		 "EventStatus":"Scheduled","NotBefore":"","Description":"","EventSource":"Platform","DurationInSeconds":-1},
		{"EventId":"e3","EventType":"Whatever","ResourceType":"VirtualMachine","Resources":[],
		 "EventStatus":"Scheduled","NotBefore":"","Description":"","EventSource":"Platform","DurationInSeconds":-1}
	]}`, a.body)

	var doc struct{ Events []struct{ NotBefore string } }
	require.NoError(t, json.Unmarshal([]byte(a.body), &doc))
	got, err := time.Parse(time.RFC1123, doc.Events[0].NotBefore)
	require.NoError(t, err, "RFC 1123")
	assert.True(t, notBefore.Equal(got))

	events := srv.Events()
	require.Len(t, events, 3)
	assert.Nil(t, events[1].Resources, "as set, defaults not filled in")
	events[0].Resources[0] = "changed"
	assert.Equal(t, "FrontEnd_IN_0", srv.Events()[0].Resources[0], "Events returns a copy")
}

func TestRefusals(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	c := client(t)
	const noHeader = `{"error":"Bad request. Required metadata header not specified"}`
	const noVersion = `{"error":"Bad request. api-version was not specified in the request. For more information refer to aka.ms/azureimds","newest-versions":["2020-07-01"]}`
	for _, tc := range []struct {
		name   string
		method string
		path   string
		hdr    map[string]string
		status int
		body   string // "" to check only that it is a JSON error
	}{
		{"no header", http.MethodGet, azuretest.PathScheduledEvents + query, nil, http.StatusBadRequest, noHeader},
		{"header false", http.MethodGet, azuretest.PathScheduledEvents + query, map[string]string{"Metadata": "false"}, http.StatusBadRequest, noHeader},
		{"ack without header", http.MethodPost, azuretest.PathScheduledEvents + query, nil, http.StatusBadRequest, noHeader},
		{"name without header", http.MethodGet, azuretest.PathVMName + "?api-version=2021-02-01&format=text", nil, http.StatusBadRequest, noHeader},
		{"X-Forwarded-For", http.MethodGet, azuretest.PathScheduledEvents + query, map[string]string{"Metadata": "true", "X-Forwarded-For": "10.0.0.1"}, http.StatusBadRequest, ""},
		{"no api-version", http.MethodGet, azuretest.PathScheduledEvents, metadata, http.StatusBadRequest, noVersion},
		{"empty api-version", http.MethodGet, azuretest.PathScheduledEvents + "?api-version=", metadata, http.StatusBadRequest, noVersion},
		{"ack without api-version", http.MethodPost, azuretest.PathScheduledEvents, metadata, http.StatusBadRequest, noVersion},
		{"name without api-version", http.MethodGet, azuretest.PathVMName + "?format=text", metadata, http.StatusBadRequest, noVersion},
		{"other path", http.MethodGet, "/metadata/instance" + query, metadata, http.StatusNotFound, ""},
		{"root", http.MethodGet, "/", metadata, http.StatusNotFound, ""},
		{"other method", http.MethodPut, azuretest.PathScheduledEvents + query, metadata, http.StatusMethodNotAllowed, ""},
		{"POST the name", http.MethodPost, azuretest.PathVMName + query, metadata, http.StatusMethodNotAllowed, ""},
		{"name as json", http.MethodGet, azuretest.PathVMName + "?api-version=2021-02-01&format=json", metadata, http.StatusBadRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, c, tc.method, srv.URL+tc.path, tc.hdr, "")
			assert.Equal(t, tc.status, a.status)
			if tc.body != "" {
				assert.Equal(t, tc.body, a.body)
			}
			var e struct{ Error string }
			require.NoError(t, json.Unmarshal([]byte(a.body), &e), a.body)
			assert.NotEmpty(t, e.Error)
			assert.True(t, strings.HasPrefix(a.hdr.Get("Content-Type"), "application/json"))
		})
	}
	assert.Empty(t, srv.StartRequests(), "a refused acknowledgement is not recorded")
	assert.Equal(t, 1, srv.Incarnation())
	assert.Equal(t, 14, requests(t, srv, "", 14), "refusals count")
	assert.Equal(t, 6, srv.Requests(azuretest.PathScheduledEvents), "PUT included")
	assert.Equal(t, 3, srv.Requests("POST"), "whatever the path")
}

func TestIncarnation(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	c := client(t)
	incarnation := func() int {
		t.Helper()
		var doc struct{ DocumentIncarnation int }
		require.NoError(t, json.Unmarshal([]byte(get(t, c, srv).body), &doc))
		assert.Equal(t, srv.Incarnation(), doc.DocumentIncarnation, "served as Incarnation says")
		return doc.DocumentIncarnation
	}
	e := azuretest.Event{EventID: "e1", EventType: "Reboot", NotBefore: notBefore}

	steps := []struct {
		name string
		do   func()
		want int
	}{
		{"new", func() {}, 1},
		{"an event", func() { srv.SetEvents(e) }, 2},
		{"the same event", func() { srv.SetEvents(e) }, 2},
		{"the same as served", func() {
			same := e
			same.Resources, same.ResourceType, same.EventStatus, same.DurationInSeconds = []string{"test-vm"}, "VirtualMachine", "Scheduled", -1
			srv.SetEvents(same)
		}, 2},
		{"back to nil Resources", func() { srv.SetEvents(e) }, 2},
		{"bump", srv.BumpIncarnation, 3},
		{"VM name of the event", func() { srv.SetVMName("vm-2") }, 4},
		{"same VM name", func() { srv.SetVMName("vm-2") }, 4},
		{"another time", func() { e.NotBefore = e.NotBefore.Add(time.Minute); srv.SetEvents(e) }, 5},
		{"none", func() { srv.SetEvents() }, 6},
		{"none again", func() { srv.SetEvents() }, 6},
		{"VM name without events", func() { srv.SetVMName("vm-3") }, 6},
		{"bump without events", srv.BumpIncarnation, 7},
	}
	for _, st := range steps {
		st.do()
		assert.Equal(t, st.want, incarnation(), st.name)
	}
}

func TestAcknowledge(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	c := client(t)
	srv.SetEvents(
		azuretest.Event{EventID: "e1", EventType: "Reboot", NotBefore: notBefore},
		azuretest.Event{EventID: "e2", EventType: "Preempt", NotBefore: notBefore},
	)
	require.Equal(t, 2, srv.Incarnation())

	a := ack(t, c, srv, `{"StartRequests":[{"EventId":"e2"},{"EventId":"unknown"}]}`)
	assert.Equal(t, http.StatusOK, a.status)
	assert.Empty(t, a.body)
	assert.Equal(t, []string{"e2", "unknown"}, srv.StartRequests())
	assert.Equal(t, 3, srv.Incarnation(), "one change, one incarnation")
	ev := srv.Events()
	assert.Equal(t, "", ev[0].EventStatus, "e1 untouched")
	assert.Equal(t, "Started", ev[1].EventStatus)
	assert.True(t, ev[1].NotBefore.IsZero())

	var doc struct {
		DocumentIncarnation int
		Events              []struct{ EventID, EventStatus, NotBefore string }
	}
	require.NoError(t, json.Unmarshal([]byte(get(t, c, srv).body), &doc))
	assert.Equal(t, 3, doc.DocumentIncarnation)
	assert.Equal(t, "Scheduled", doc.Events[0].EventStatus)
	assert.Equal(t, "Mon, 19 Sep 2016 18:29:47 GMT", doc.Events[0].NotBefore)
	assert.Equal(t, "Started", doc.Events[1].EventStatus)
	assert.Equal(t, "", doc.Events[1].NotBefore, "no NotBefore once started")

	a = ack(t, c, srv, `{"StartRequests":[{"EventId":"e2"}]}`)
	assert.Equal(t, http.StatusOK, a.status)
	assert.Equal(t, 3, srv.Incarnation(), "started already: nothing changes")

	srv.SetStartOnAck(false)
	a = ack(t, c, srv, `{"StartRequests":[{"EventId":"e1"}]}`)
	assert.Equal(t, http.StatusOK, a.status)
	assert.Equal(t, []string{"e2", "unknown", "e2", "e1"}, srv.StartRequests())
	assert.Equal(t, "", srv.Events()[0].EventStatus, "recorded, not started")
	assert.Equal(t, 3, srv.Incarnation())

	for _, body := range []string{`{}`, `{"StartRequests":[]}`} {
		a = ack(t, c, srv, body)
		assert.Equal(t, http.StatusOK, a.status, body)
	}
	assert.Len(t, srv.StartRequests(), 4)
	assert.Equal(t, 5, requests(t, srv, "POST", 5))
	assert.Equal(t, 1, srv.Requests(azuretest.PathScheduledEvents), "POSTs are not polls")
}

func TestAcknowledgeRefused(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Reboot"})
	c := client(t)

	for _, body := range []string{"", "{", `{"StartRequests":"e1"}`, `{"StartRequests":[{"EventId":1}]}`, "<html>"} {
		a := ack(t, c, srv, body)
		assert.Equal(t, http.StatusBadRequest, a.status, "%q", body)
		assert.Contains(t, a.body, `"error"`)
	}

	// Valid JSON, far too long: the server reads no more than its bound.
	huge := `{"StartRequests":[` + strings.Repeat(`{"EventId":"e1"},`, 1<<16) + `{"EventId":"e1"}]}`
	req, err := http.NewRequest(http.MethodPost, srv.URL+azuretest.PathScheduledEvents+query, strings.NewReader(huge))
	require.NoError(t, err)
	req.Header.Set("Metadata", "true")
	res, err := c.Do(req)
	if err == nil { // else the server hung up while the body was being sent
		res.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	}
	assert.Empty(t, srv.StartRequests())
	assert.Equal(t, 2, srv.Incarnation())

	a := ack(t, c, srv, `{"StartRequests":[{"EventId":"e1"}]}`)
	assert.Equal(t, http.StatusOK, a.status, "still serving")
	assert.Equal(t, []string{"e1"}, srv.StartRequests())
}

func TestWaitStartRequests(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	c := client(t)

	type result struct {
		ids []string
		err error
	}
	got := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		ids, err := srv.WaitStartRequests(ctx, 2)
		got <- result{ids, err}
	}()
	ack(t, c, srv, `{"StartRequests":[{"EventId":"a"}]}`)
	ack(t, c, srv, `{"StartRequests":[{"EventId":"b"},{"EventId":"c"}]}`)
	select {
	case r := <-got:
		require.NoError(t, r.err)
		assert.Equal(t, []string{"a", "b", "c"}, r.ids)
	case <-time.After(wait):
		t.Fatal("WaitStartRequests did not return")
	}

	ids, err := srv.WaitStartRequests(context.Background(), 1)
	require.NoError(t, err, "there already")
	assert.Len(t, ids, 3)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ids, err = srv.WaitStartRequests(ctx, 4)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []string{"a", "b", "c"}, ids, "those so far")

	closed := make(chan error, 1)
	go func() {
		_, err := srv.WaitStartRequests(context.Background(), 4)
		closed <- err
	}()
	srv.Close()
	select {
	case err := <-closed:
		assert.ErrorContains(t, err, "closed")
	case <-time.After(wait):
		t.Fatal("WaitStartRequests did not return on Close")
	}
}

func TestEnableDelay(t *testing.T) {
	const d = 200 * time.Millisecond
	srv := azuretest.NewServer()
	defer srv.Close()
	c := client(t)

	a := do(t, c, http.MethodGet, srv.URL+azuretest.PathScheduledEvents+query, nil, "")
	require.Equal(t, http.StatusBadRequest, a.status)
	srv.SetEnableDelay(d)
	a = do(t, c, http.MethodGet, srv.URL+azuretest.PathScheduledEvents+query, nil, "")
	assert.Equal(t, http.StatusBadRequest, a.status, "a refused request neither waits nor enables")
	assert.Equal(t, http.StatusOK, do(t, c, http.MethodGet, srv.URL+azuretest.PathVMName+"?api-version=2021-02-01&format=text", metadata, "").status)

	start := time.Now()
	first := getAsync(c, srv)
	inFlight(t, srv, 1)
	second := getAsync(c, srv) // arrives while the service enables itself
	inFlight(t, srv, 2)
	srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Reboot"})
	assert.Equal(t, http.StatusOK, recv(t, first))
	assert.Equal(t, http.StatusOK, recv(t, second))
	assert.GreaterOrEqual(t, time.Since(start), d, "both waited for the enabling")

	start = time.Now()
	a = get(t, c, srv)
	assert.Less(t, time.Since(start), d, "enabled: answered at once")
	assert.Contains(t, a.body, `"e1"`)
}

// Stop, Close, the client giving up and SetEnableDelay end a request's
// wait for the enabling.
func TestEnableDelayEnded(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*azuretest.Server)
		want int // status; 0: no answer
	}{
		{"Stop", (*azuretest.Server).Stop, 0},
		{"Close", (*azuretest.Server).Close, 0},
		{"SetEnableDelay", func(s *azuretest.Server) { s.SetEnableDelay(0) }, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := azuretest.NewServer()
			defer srv.Close()
			srv.SetEnableDelay(time.Hour)
			got := getAsync(client(t), srv)
			inFlight(t, srv, 1)
			select {
			case <-got:
				t.Fatal("answered while enabling")
			default:
			}
			tc.end(srv)
			assert.Equal(t, tc.want, recv(t, got))
		})
	}

	t.Run("client gives up", func(t *testing.T) {
		srv := azuretest.NewServer()
		defer srv.Close()
		srv.SetEnableDelay(time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+azuretest.PathScheduledEvents+query, nil)
		require.NoError(t, err)
		req.Header.Set("Metadata", "true")
		c := client(t)
		errc := make(chan error, 1)
		go func() {
			res, err := c.Do(req)
			if err == nil {
				res.Body.Close()
			}
			errc <- err
		}()
		inFlight(t, srv, 1)
		cancel()
		select {
		case err := <-errc:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(wait):
			t.Fatal("no end")
		}
		await(t, srv, "the handler to end", func() bool { return srv.InFlight() == 0 })
	})
}

func TestVMName(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	c := client(t)
	url := srv.URL + azuretest.PathVMName + "?api-version=2021-02-01&format=text"

	a := do(t, c, http.MethodGet, url, metadata, "")
	assert.Equal(t, http.StatusOK, a.status)
	assert.Equal(t, "test-vm", a.body)
	assert.True(t, strings.HasPrefix(a.hdr.Get("Content-Type"), "text/plain"))

	srv.SetVMName("myVM-7")
	a = do(t, c, http.MethodGet, url, metadata, "")
	assert.Equal(t, "myVM-7", a.body)
	a = do(t, c, http.MethodGet, srv.URL+azuretest.PathVMName+"?api-version=2021-02-01", metadata, "")
	assert.Equal(t, "myVM-7", a.body, "no format: text")

	srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Redeploy"})
	assert.Contains(t, get(t, c, srv).body, `"Resources":["myVM-7"]`)
	assert.Equal(t, 3, requests(t, srv, azuretest.PathVMName, 3))
}

func TestStopStart(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Reboot"})
	c := client(t)
	require.Equal(t, http.StatusOK, get(t, c, srv).status) // leaves a keep-alive connection
	url := srv.URL

	srv.Stop()
	srv.Stop() // twice is fine
	req, err := http.NewRequest(http.MethodGet, srv.URL+azuretest.PathScheduledEvents+query, nil)
	require.NoError(t, err)
	req.Header.Set("Metadata", "true")
	_, err = c.Do(req)
	require.Error(t, err)

	require.NoError(t, srv.Start())
	require.NoError(t, srv.Start(), "started already")
	assert.Equal(t, url, srv.URL)
	a := get(t, c, srv)
	assert.Equal(t, http.StatusOK, a.status)
	assert.Contains(t, a.body, `"e1"`, "state survives")

	srv.Close()
	srv.Close()
	assert.Error(t, srv.Start())
}

package gcemetatest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/compute/metadata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/termsigtest"
)

const wait = 5 * time.Second

const preempted = gcemetatest.Preempted

type answer struct {
	code int
	body string
	etag string
	hdr  http.Header
	err  error
}

// fixture is a fake and a client of its own, both closed when the test
// ends.
type fixture struct {
	t   *testing.T
	srv *gcemetatest.Server
	hc  *http.Client
}

func newFixture(t *testing.T) *fixture {
	srv := gcemetatest.NewServer()
	tr := &http.Transport{}
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	return &fixture{t: t, srv: srv, hc: &http.Client{Transport: tr}}
}

// get sends a GET for path (with its query) with the headers given as
// name, value pairs; with no headers it sends Metadata-Flavor: Google.
func (f *fixture) get(ctx context.Context, path string, hdr ...string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+path, nil)
	require.NoError(f.t, err)
	if hdr == nil {
		hdr = []string{"Metadata-Flavor", "Google"}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := f.hc.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{code: res.StatusCode, body: string(b), etag: res.Header.Get("ETag"), hdr: res.Header, err: err}
}

// async sends get in a goroutine and returns the channel of its answer.
func (f *fixture) async(ctx context.Context, path string) <-chan answer {
	c := make(chan answer, 1)
	go func() { c <- f.get(ctx, path) }()
	return c
}

func (f *fixture) await(what string, cond func() bool) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(f.t, f.srv.Await(ctx, cond), what)
}

func recv(t *testing.T, c <-chan answer) answer {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(wait):
		t.Fatal("no answer")
	}
	return answer{}
}

const v1 = "/computeMetadata/v1/"

func TestMetadataFlavorRequired(t *testing.T) {
	f := newFixture(t)
	for _, hdr := range [][]string{
		{"User-Agent", "curl"},
		{"Metadata-Flavor", "google"},
		{"Metadata-Flavor", "Google", "X-Forwarded-For", "10.0.0.1"},
	} {
		a := f.get(context.Background(), v1+preempted, hdr...)
		require.NoError(t, a.err)
		assert.Equal(t, http.StatusForbidden, a.code, hdr)
		assert.NotEmpty(t, a.etag, "an ETag on every answer")
		assert.NotContains(t, a.body, "FALSE")
	}
	assert.Equal(t, 3, f.srv.Requests(preempted), "refused requests count too")
}

func TestValuesAndETags(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for key, want := range map[string]string{
		preempted:                       "FALSE",
		gcemetatest.MaintenanceEvent:    "NONE",
		gcemetatest.UpcomingMaintenance: "{}",
	} {
		a := f.get(ctx, v1+key)
		require.NoError(t, a.err)
		assert.Equal(t, 200, a.code)
		assert.Equal(t, want, a.body)
		assert.Equal(t, gcemetatest.ETag(key, want), a.etag)
		assert.Equal(t, "Google", a.hdr.Get("Metadata-Flavor"))
	}
	a := f.get(ctx, v1+gcemetatest.UpcomingMaintenance+"?alt=json")
	assert.Equal(t, "application/json", a.hdr.Get("Content-Type"))

	f.srv.Set(preempted, "TRUE")
	a = f.get(ctx, v1+preempted)
	assert.Equal(t, "TRUE", a.body)
	assert.Equal(t, gcemetatest.ETag(preempted, "TRUE"), a.etag)
	assert.NotEqual(t, gcemetatest.ETag(preempted, "FALSE"), a.etag)

	f.srv.Delete(preempted)
	a = f.get(ctx, v1+preempted)
	assert.Equal(t, http.StatusNotFound, a.code)
	assert.NotEmpty(t, a.etag)
	_, ok := f.srv.Value(preempted)
	assert.False(t, ok)

	a = f.get(ctx, v1+"instance/no-such-key")
	assert.Equal(t, http.StatusNotFound, a.code)
	assert.Equal(t, 1, f.srv.Requests("instance/no-such-key"))
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{"?wait_for_change=maybe", "?timeout_sec=0", "?timeout_sec=x", "?alt=xml"} {
		a := f.get(context.Background(), v1+preempted+q)
		assert.Equal(t, http.StatusBadRequest, a.code, q)
	}
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+v1+preempted, nil)
	require.NoError(t, err)
	req.Header.Set("Metadata-Flavor", "Google")
	res, err := f.hc.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
}

func TestRootAnswersLikeGCE(t *testing.T) {
	f := newFixture(t)
	a := f.get(context.Background(), "/")
	assert.Equal(t, 200, a.code)
	assert.Equal(t, "computeMetadata/\n", a.body)
	assert.Equal(t, "Google", a.hdr.Get("Metadata-Flavor"))
}

func TestWaitForChange(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	etag := gcemetatest.ETag(preempted, "FALSE")

	// A stale last_etag: answered at once.
	a := f.get(ctx, v1+preempted+"?wait_for_change=true&last_etag=stale&timeout_sec=60")
	assert.Equal(t, "FALSE", a.body)

	// The current last_etag: held until the value changes.
	c := f.async(ctx, v1+preempted+"?wait_for_change=true&last_etag="+etag+"&timeout_sec=60")
	f.await("a waiting long poll", func() bool { return f.srv.Waiting(preempted) == 1 })
	f.srv.Set(preempted, "FALSE")                     // the same value: no change
	f.srv.Set(gcemetatest.MaintenanceEvent, "NONE")   // another key: no change here
	f.srv.Set(gcemetatest.UpcomingMaintenance, "{ }") // another key: wakes the poll, which goes on waiting
	assert.Equal(t, 1, f.srv.Waiting(preempted))
	select {
	case a := <-c:
		t.Fatalf("answered before a change: %+v", a)
	default:
	}
	f.srv.Set(preempted, "TRUE")
	a = recv(t, c)
	assert.Equal(t, "TRUE", a.body)
	assert.Equal(t, gcemetatest.ETag(preempted, "TRUE"), a.etag)
	f.await("no waiting poll", func() bool { return f.srv.Waiting(preempted) == 0 })

	// Without last_etag: held until the next change, as on GCE.
	c = f.async(ctx, v1+preempted+"?wait_for_change=true")
	f.await("a waiting long poll", func() bool { return f.srv.Waiting(preempted) == 1 })
	f.srv.Delete(preempted)
	assert.Equal(t, http.StatusNotFound, recv(t, c).code, "deleting answers 404")
}

// With IgnoreLastETag, a stale last_etag is not answered at once: the
// long poll waits for the next change, as some emulators do.
func TestIgnoreLastETag(t *testing.T) {
	f := newFixture(t)
	f.srv.IgnoreLastETag(true)
	c := f.async(context.Background(), v1+preempted+"?wait_for_change=true&last_etag=stale&timeout_sec=60")
	f.await("a waiting long poll", func() bool { return f.srv.Waiting(preempted) == 1 })
	f.srv.Set(preempted, "TRUE")
	assert.Equal(t, "TRUE", recv(t, c).body)

	f.srv.IgnoreLastETag(false)
	a := f.get(context.Background(), v1+preempted+"?wait_for_change=true&last_etag=stale&timeout_sec=60")
	assert.Equal(t, "TRUE", a.body, "heeded again: answered at once")
}

func TestWaitForChangeTimeout(t *testing.T) {
	f := newFixture(t)
	etag := gcemetatest.ETag(preempted, "FALSE")
	start := time.Now()
	a := f.get(context.Background(), v1+preempted+"?wait_for_change=true&last_etag="+etag+"&timeout_sec=1")
	took := time.Since(start)
	assert.Equal(t, 200, a.code)
	assert.Equal(t, "FALSE", a.body)
	assert.Equal(t, etag, a.etag, "the same ETag: nothing changed")
	assert.GreaterOrEqual(t, took, time.Second)
}

func TestFaultStatus(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.srv.Inject(termsigtest.Fault{Key: preempted, Status: 503, Count: 2})
	assert.Equal(t, 200, f.get(ctx, v1+gcemetatest.MaintenanceEvent).code, "another key")
	for range 2 {
		a := f.get(ctx, v1+preempted)
		assert.Equal(t, 503, a.code)
		assert.NotEmpty(t, a.etag)
	}
	assert.Equal(t, 200, f.get(ctx, v1+preempted).code, "the burst is over")
}

func TestFaultBody(t *testing.T) {
	f := newFixture(t)
	f.srv.Inject(termsigtest.Fault{Body: "<html>Bad gateway</html>", Count: 1})
	a := f.get(context.Background(), v1+preempted)
	assert.Equal(t, 200, a.code)
	assert.Equal(t, "<html>Bad gateway</html>", a.body)
	assert.NotEmpty(t, a.etag)
}

func TestFaultDelay(t *testing.T) {
	f := newFixture(t)
	f.srv.Inject(termsigtest.Fault{Delay: 50 * time.Millisecond, Count: 1})
	start := time.Now()
	a := f.get(context.Background(), v1+preempted)
	assert.Equal(t, "FALSE", a.body)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
}

func TestFaultDrop(t *testing.T) {
	f := newFixture(t)
	f.srv.Inject(termsigtest.Fault{Drop: true, Count: 1})
	a := f.get(context.Background(), v1+preempted)
	assert.Error(t, a.err)
	assert.Equal(t, 200, f.get(context.Background(), v1+preempted).code)
}

func TestDropWaiting(t *testing.T) {
	f := newFixture(t)
	etag := gcemetatest.ETag(preempted, "FALSE")
	c := f.async(context.Background(), v1+preempted+"?wait_for_change=true&last_etag="+etag)
	f.await("a waiting long poll", func() bool { return f.srv.Waiting(preempted) == 1 })
	f.srv.DropWaiting(gcemetatest.MaintenanceEvent) // nobody waits there
	f.srv.DropWaiting(preempted)
	assert.Error(t, recv(t, c).err)
}

func TestFaultNoLongPoll(t *testing.T) {
	f := newFixture(t)
	f.srv.Inject(termsigtest.Fault{NoLongPoll: true})
	etag := gcemetatest.ETag(preempted, "FALSE")
	for range 3 {
		a := f.get(context.Background(), v1+preempted+"?wait_for_change=true&last_etag="+etag+"&timeout_sec=60")
		assert.Equal(t, etag, a.etag)
	}
	assert.Equal(t, 3, f.srv.Requests(preempted))
}

func TestFaultHang(t *testing.T) {
	f := newFixture(t)
	f.srv.Inject(termsigtest.Fault{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a := f.get(ctx, v1+preempted)
	assert.ErrorIs(t, a.err, context.DeadlineExceeded, "no answer")

	c := f.async(context.Background(), v1+preempted)
	f.await("the second request", func() bool { return f.srv.Requests(preempted) == 2 })
	f.srv.ClearFaults()
	a = recv(t, c)
	assert.Equal(t, "FALSE", a.body, "released and served")
}

// Foreign takes the Metadata-Flavor header off the answer, whatever it
// is; a hang that ClearFaults releases is served with it, as without a
// fault.
func TestFaultForeign(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.srv.Inject(termsigtest.Fault{Key: preempted, Foreign: true, Count: 1})
	f.srv.Inject(termsigtest.Fault{Key: preempted, Foreign: true, Body: "TRUE", Count: 1})
	f.srv.Inject(termsigtest.Fault{Key: preempted, Foreign: true, Hang: true, Count: 1})
	for _, want := range []string{"FALSE", "TRUE"} {
		a := f.get(ctx, v1+preempted)
		assert.Equal(t, 200, a.code)
		assert.Equal(t, want, a.body)
		assert.Empty(t, a.hdr.Values("Metadata-Flavor"))
		assert.NotEmpty(t, a.etag)
	}
	c := f.async(ctx, v1+preempted)
	f.await("the hanging request", func() bool { return f.srv.Requests(preempted) == 3 })
	f.srv.ClearFaults()
	a := recv(t, c)
	assert.Equal(t, "FALSE", a.body)
	assert.Equal(t, "Google", a.hdr.Get("Metadata-Flavor"), "released: served as without a fault")
}

func TestFaultBodySize(t *testing.T) {
	f := newFixture(t)
	f.srv.Inject(termsigtest.Fault{Key: preempted, BodySize: 1<<20 + 1, Count: 1})
	a := f.get(context.Background(), v1+preempted)
	require.NoError(t, a.err)
	assert.Equal(t, 200, a.code)
	assert.Len(t, a.body, 1<<20+1)
	assert.Equal(t, "Google", a.hdr.Get("Metadata-Flavor"))

	f.srv.Inject(termsigtest.Fault{Key: preempted, BodySize: termsigtest.EndlessBody, Status: 503})
	req, err := http.NewRequest(http.MethodGet, f.srv.URL+v1+preempted, nil)
	require.NoError(t, err)
	req.Header.Set("Metadata-Flavor", "Google")
	res, err := f.hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, 503, res.StatusCode)
	n, err := io.CopyN(io.Discard, res.Body, 4<<20)
	require.NoError(t, err, "still going")
	assert.Equal(t, int64(4<<20), n)
}

func TestCloseReleasesHangingRequests(t *testing.T) {
	srv := gcemetatest.NewServer()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	f := &fixture{t: t, srv: srv, hc: &http.Client{Transport: tr}}
	srv.Inject(termsigtest.Fault{Key: preempted, Hang: true})
	hung := f.async(context.Background(), v1+preempted)
	polling := f.async(context.Background(), v1+gcemetatest.MaintenanceEvent+"?wait_for_change=true")
	f.await("both requests", func() bool {
		return srv.Requests(preempted) == 1 && srv.Waiting(gcemetatest.MaintenanceEvent) == 1
	})
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("Close did not return")
	}
	assert.Error(t, recv(t, hung).err)
	assert.Error(t, recv(t, polling).err)
	srv.Close() // twice is fine
	assert.Error(t, srv.Await(context.Background(), func() bool { return false }))
}

func TestAwait(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, f.srv.Await(ctx, func() bool { return false }), context.Canceled)
	assert.NoError(t, f.srv.Await(ctx, func() bool { return true }), "a condition that holds returns at once")

	done := make(chan error, 1)
	go func() {
		done <- f.srv.Await(context.Background(), func() bool { return f.srv.Requests(preempted) >= 3 })
	}()
	for range 3 {
		f.get(context.Background(), v1+preempted)
	}
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("Await did not return")
	}
}

// TestGoogleClient shows that Google's own client works against the fake.
func TestGoogleClient(t *testing.T) {
	f := newFixture(t)
	t.Setenv("GCE_METADATA_HOST", f.srv.Host())
	c := metadata.NewWithOptions(&metadata.Options{Client: f.hc})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	v, err := c.GetWithContext(ctx, "instance/maintenance-event")
	require.NoError(t, err)
	assert.Equal(t, "NONE", v)
	_, err = c.GetWithContext(ctx, "instance/no-such-key")
	var nd metadata.NotDefinedError
	assert.ErrorAs(t, err, &nd)

	errSeen := errors.New("seen")
	go func() {
		_ = f.srv.Await(ctx, func() bool { return f.srv.Waiting(preempted) == 1 })
		f.srv.Set(preempted, "TRUE")
	}()
	var seen []string
	err = c.SubscribeWithContext(ctx, preempted, func(_ context.Context, v string, ok bool) error {
		seen = append(seen, v)
		if strings.TrimSpace(v) == "TRUE" {
			return errSeen
		}
		return nil
	})
	assert.ErrorIs(t, err, errSeen)
	assert.Equal(t, []string{"FALSE", "TRUE"}, seen)
}

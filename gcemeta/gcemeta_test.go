package gcemeta_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/compute/metadata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/internal/watchtest"
	"github.com/termsig/termsig/termsigtest"
)

const (
	preempted   = gcemetatest.Preempted
	maintenance = gcemetatest.MaintenanceEvent
	upcoming    = gcemetatest.UpcomingMaintenance
)

// --- host detection ---

func TestUnavailableOffGCEWithoutNetwork(t *testing.T) {
	t.Setenv(gcemeta.HostEnv, "")
	rt := newRoundTripper(t, nil) // fails any request
	src := gcemeta.New(gcemeta.Config{
		Root:       t.TempDir(), // no DMI files: not GCE
		HTTPClient: &http.Client{Transport: rt},
	})
	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		start := time.Now()
		_, errc := watchtest.Watch(t, termsig.Config{Logger: slog.New(slog.DiscardHandler)}, src)
		err := watchtest.Returned(t, errc)
		took := time.Since(start)
		require.ErrorIs(t, err, termsig.ErrUnavailable)
		assert.Contains(t, err.Error(), "not on GCE")
		return took
	})
	assert.Empty(t, rt.requests(), "no network access off GCE")

	logs := newLogRecorder()
	n := termsig.Config{Logger: logs.logger()}.New(src)
	defer n.Stop()
	logs.waitFor(t, "termsig: source unavailable")
	assert.Equal(t, termsig.StateUnavailable, n.Status()[0].State)
}

func TestZeroConfigOffGCE(t *testing.T) {
	if _, err := os.Stat("/sys/class/dmi/id/product_name"); err == nil {
		b, _ := os.ReadFile("/sys/class/dmi/id/product_name")
		if strings.HasPrefix(string(b), "Google") {
			t.Skip("this host is on GCE")
		}
	}
	t.Setenv(gcemeta.HostEnv, "")
	_, errc := watchtest.Watch(t, termsig.Config{Logger: slog.New(slog.DiscardHandler)}, gcemeta.New(gcemeta.Config{}))
	assert.ErrorIs(t, watchtest.Returned(t, errc), termsig.ErrUnavailable)
}

func TestZeroConfigUsesGCEMetadataHost(t *testing.T) {
	srv := newServer(t)
	srv.Set(preempted, "TRUE") // preempted before the program started
	t.Setenv(gcemeta.HostEnv, srv.Host())
	n := termsig.New(gcemeta.New(gcemeta.Config{}))
	defer n.Stop()
	nt := receive(t, n)
	assert.Equal(t, "gcemeta", nt.Source)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, "instance preempted", nt.Reason)
	assert.Equal(t, 30*time.Second, nt.Deadline.Sub(nt.Observed))
	assert.Equal(t, "TRUE", nt.Raw)
}

func TestEnvNamesTheHostOffGCE(t *testing.T) {
	srv := newServer(t)
	srv.Set(maintenance, "MIGRATE_ON_HOST_MAINTENANCE")
	t.Setenv(gcemeta.HostEnv, srv.Host())
	n := termsig.New(gcemeta.New(gcemeta.Config{Root: t.TempDir()}))
	defer n.Stop()
	assert.Equal(t, termsig.Maintenance, receive(t, n).Kind)
}

func TestDMISaysGCE(t *testing.T) {
	for _, product := range []string{"Google Compute Engine", "Google"} {
		t.Run(product, func(t *testing.T) {
			root := t.TempDir()
			dmi := filepath.Join(root, "sys/class/dmi/id")
			require.NoError(t, os.MkdirAll(dmi, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dmi, "product_name"), []byte(product+"\n"), 0o644))
			srv := newServer(t)
			srv.Set(preempted, "TRUE")
			rt := newRoundTripper(t, srv)
			t.Setenv(gcemeta.HostEnv, "")
			n := termsig.New(gcemeta.New(gcemeta.Config{Root: root, HTTPClient: &http.Client{Transport: rt}}))
			defer n.Stop()
			assert.Equal(t, termsig.Terminate, receive(t, n).Kind)
			reqs := rt.requests()
			require.NotEmpty(t, reqs)
			assert.Equal(t, "metadata.google.internal", reqs[0].URL.Host)
		})
	}
}

func TestAvailable(t *testing.T) {
	gce := t.TempDir()
	dmi := filepath.Join(gce, "sys/class/dmi/id")
	require.NoError(t, os.MkdirAll(dmi, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dmi, "product_name"), []byte("Google Compute Engine\n"), 0o644))
	off := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  gcemeta.Config
		env  string // GCE_METADATA_HOST
		want error
	}{
		{"off GCE", gcemeta.Config{Root: off}, "", termsig.ErrUnavailable},
		{"DMI", gcemeta.Config{Root: gce}, "", nil},
		{"env", gcemeta.Config{Root: off}, "127.0.0.1:8080", nil},
		{"host", gcemeta.Config{Root: off, Host: "127.0.0.1:1"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(gcemeta.HostEnv, tc.env)
			err := gcemeta.New(tc.cfg).Available()
			if tc.want == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.want)
			}
		})
	}
	err := gcemeta.New(gcemeta.Config{Host: "a b"}).Available()
	require.Error(t, err)
	assert.NotErrorIs(t, err, termsig.ErrUnavailable)
	assert.Equal(t, "gcemeta", gcemeta.New(gcemeta.Config{}).Name())
}

// --- the requests ---

func TestRequests(t *testing.T) {
	for _, tc := range []struct {
		wait    time.Duration
		timeout string
	}{{0, "60"}, {1500 * time.Millisecond, "2"}, {time.Millisecond, "1"}} {
		t.Run(tc.timeout, func(t *testing.T) {
			srv := newServer(t)
			rt := newRoundTripper(t, srv)
			cfg := fast(srv)
			cfg.WaitTimeout = tc.wait
			cfg.HTTPClient = &http.Client{Transport: rt}
			run(t, srv, cfg)
			for _, k := range []string{preempted, maintenance, upcoming} {
				awaitPolling(t, srv, k)
			}
			byKey := map[string][]*http.Request{}
			for _, r := range rt.requests() {
				byKey[r.URL.Path] = append(byKey[r.URL.Path], r)
			}
			for _, k := range []string{preempted, maintenance, upcoming} {
				reqs := byKey["/computeMetadata/v1/"+k]
				require.GreaterOrEqual(t, len(reqs), 2, k)
				for _, r := range reqs {
					assert.Equal(t, "Google", r.Header.Get("Metadata-Flavor"))
					assert.Empty(t, r.Header.Get("X-Forwarded-For"))
					assert.Equal(t, http.MethodGet, r.Method)
				}
				first, second := reqs[0].URL.Query(), reqs[1].URL.Query()
				assert.Empty(t, first.Get("wait_for_change"), "the current value is read first")
				assert.Equal(t, "true", second.Get("wait_for_change"))
				v, _ := srv.Value(k)
				assert.Equal(t, gcemetatest.ETag(k, v), second.Get("last_etag"))
				assert.Equal(t, tc.timeout, second.Get("timeout_sec"))
				if k == upcoming {
					assert.Equal(t, "json", first.Get("alt"))
					assert.Equal(t, "json", second.Get("alt"))
				}
			}
		})
	}
}

func TestLongPollTimeoutIsNeitherNoticeNorError(t *testing.T) {
	srv := newServer(t)
	cfg := fast(srv)
	cfg.WaitTimeout = time.Second
	h := run(t, srv, cfg)
	// The first read, then two long polls that time out, then a third.
	await(t, srv, "three long polls", func() bool { return srv.Requests(preempted) >= 4 })
	assert.Empty(t, stopAndDrain(h.n))
	assert.Zero(t, h.logs.count(logFailing))
	assert.NoError(t, h.n.Status()[0].Err)
}

// --- the notices ---

func TestPreemptedDuringLongPoll(t *testing.T) {
	srv := newServer(t)
	h := run(t, srv, fast(srv))
	awaitPolling(t, srv, preempted)
	sent := time.Now()
	srv.Set(preempted, "TRUE")
	nt := receive(t, h.n)
	took := time.Since(sent)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, 30*time.Second, nt.Deadline.Sub(nt.Observed))
	// Seen through the long poll, not by a later read: the read and one
	// long poll, answered at once.
	assert.Equal(t, 2, srv.Requests(preempted))
	assert.Less(t, took, time.Second)
	t.Logf("flip to notice: %v", took)
}

func TestMaintenanceEventValues(t *testing.T) {
	for _, tc := range []struct {
		value    string
		kind     termsig.Kind
		reason   string
		deadline time.Duration
	}{
		{"TERMINATE_ON_HOST_MAINTENANCE", termsig.Terminate, "host maintenance: TERMINATE_ON_HOST_MAINTENANCE", time.Minute},
		{"SHUTDOWN_ON_HOST_MAINTENANCE", termsig.Terminate, "host maintenance: SHUTDOWN_ON_HOST_MAINTENANCE", time.Minute},
		{"MIGRATE_ON_HOST_MAINTENANCE", termsig.Maintenance, "host maintenance: MIGRATE_ON_HOST_MAINTENANCE", time.Minute},
		{"SOMETHING_NEW", termsig.Maintenance, "host maintenance: unknown event SOMETHING_NEW", 0},
		{"TRUE", termsig.Maintenance, "host maintenance: unknown event TRUE", 0},
	} {
		for _, atStart := range []bool{true, false} {
			name := tc.value + map[bool]string{true: "/at start", false: "/during long poll"}[atStart]
			t.Run(name, func(t *testing.T) {
				srv := newServer(t)
				if atStart {
					srv.Set(maintenance, tc.value)
				}
				h := run(t, srv, fast(srv))
				if !atStart {
					flip(t, srv, maintenance, tc.value)
				}
				nt := receive(t, h.n)
				assert.Equal(t, tc.kind, nt.Kind)
				assert.Equal(t, tc.reason, nt.Reason)
				assert.Equal(t, tc.value, nt.Raw)
				if tc.deadline == 0 {
					assert.True(t, nt.Deadline.IsZero())
				} else {
					assert.Equal(t, tc.deadline, nt.Deadline.Sub(nt.Observed))
				}

				flip(t, srv, maintenance, "NONE")
				nt = receive(t, h.n)
				assert.Equal(t, termsig.Cleared, nt.Kind)
				assert.Equal(t, "host maintenance over: NONE", nt.Reason)
				assert.Empty(t, stopAndDrain(h.n))
			})
		}
	}
}

func TestMaintenanceFalseMeansNone(t *testing.T) {
	srv := newServer(t)
	srv.Set(maintenance, "FALSE")
	h := run(t, srv, fast(srv))
	flip(t, srv, maintenance, "NONE")
	flip(t, srv, maintenance, "FALSE")
	flip(t, srv, maintenance, "MIGRATE_ON_HOST_MAINTENANCE")
	flip(t, srv, maintenance, "FALSE")
	assert.Equal(t, []string{
		"maintenance: host maintenance: MIGRATE_ON_HOST_MAINTENANCE",
		"cleared: host maintenance over: FALSE",
	}, kinds(stopAndDrain(h.n)))
}

func TestEachChangeReportedOnce(t *testing.T) {
	srv := newServer(t)
	// The server answers every long poll at once, so the source reads
	// the same values again and again.
	srv.Inject(termsigtest.Fault{NoLongPoll: true})
	h := run(t, srv, fast(srv))
	srv.Set(preempted, "TRUE")
	srv.Set(maintenance, "MIGRATE_ON_HOST_MAINTENANCE")
	seen := map[termsig.Kind]int{}
	for range 2 {
		seen[receive(t, h.n).Kind]++
	}
	assert.Equal(t, map[termsig.Kind]int{termsig.Terminate: 1, termsig.Maintenance: 1}, seen)
	p, m := srv.Requests(preempted), srv.Requests(maintenance)
	await(t, srv, "ten more reads of each key", func() bool {
		return srv.Requests(preempted) >= p+10 && srv.Requests(maintenance) >= m+10
	})
	assert.Empty(t, stopAndDrain(h.n), "a value read again is not reported again")
}

func TestMaintenanceSequence(t *testing.T) {
	srv := newServer(t)
	h := run(t, srv, fast(srv))
	for _, v := range []string{
		"MIGRATE_ON_HOST_MAINTENANCE",
		"TERMINATE_ON_HOST_MAINTENANCE",
		"NONE",
		"MIGRATE_ON_HOST_MAINTENANCE",
	} {
		flip(t, srv, maintenance, v)
	}
	assert.Equal(t, []string{
		"maintenance: host maintenance: MIGRATE_ON_HOST_MAINTENANCE",
		"terminate: host maintenance: TERMINATE_ON_HOST_MAINTENANCE",
		"cleared: host maintenance over: NONE",
		"maintenance: host maintenance: MIGRATE_ON_HOST_MAINTENANCE",
	}, kinds(stopAndDrain(h.n)))
}

func TestPreemptedBackToFalseIsNotCleared(t *testing.T) {
	srv := newServer(t)
	h := run(t, srv, fast(srv))
	flip(t, srv, preempted, "TRUE")
	flip(t, srv, preempted, "FALSE")
	flip(t, srv, preempted, "TRUE")
	assert.Equal(t, []string{
		"terminate: instance preempted",
		"terminate: instance preempted",
	}, kinds(stopAndDrain(h.n)))
	h.logs.waitFor(t, "gcemeta: value changed", "value=FALSE")
}

const (
	windowPending = `{"can_reschedule":true,"latest_window_start_time":"2026-12-08T10:00:00Z","maintenance_status":"PENDING","type":"SCHEDULED","window_end_time":"2026-12-01T11:00:00Z","window_start_time":"2026-12-01T10:00:00Z"}`
	windowOngoing = `{"can_reschedule":false,"maintenance_status":"ONGOING","type":"SCHEDULED","window_end_time":"2026-12-01T11:00:00Z","window_start_time":"2026-12-01T10:00:00Z"}`
	windowDone    = `{"maintenance_status":"COMPLETE","type":"SCHEDULED","window_end_time":"2026-12-01T11:00:00Z","window_start_time":"2026-12-01T10:00:00Z"}`
)

func TestUpcomingMaintenance(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, atStart := range []bool{true, false} {
		t.Run(map[bool]string{true: "at start", false: "during long poll"}[atStart], func(t *testing.T) {
			srv := newServer(t)
			if atStart {
				srv.Set(upcoming, windowPending)
			}
			h := run(t, srv, fast(srv))
			if !atStart {
				flip(t, srv, upcoming, windowPending)
			}
			nt := receive(t, h.n)
			assert.Equal(t, termsig.Maintenance, nt.Kind)
			assert.Equal(t, "upcoming maintenance: SCHEDULED, PENDING, window from 2026-12-01T10:00:00Z to 2026-12-01T11:00:00Z", nt.Reason)
			assert.True(t, start.Equal(nt.Deadline), "deadline %v", nt.Deadline)
			assert.Equal(t, windowPending, nt.Raw)

			flip(t, srv, upcoming, windowOngoing) // the status changed: told again
			nt = receive(t, h.n)
			assert.Equal(t, termsig.Maintenance, nt.Kind)
			assert.Contains(t, nt.Reason, "ONGOING")

			flip(t, srv, upcoming, "{}") // the window disappeared
			nt = receive(t, h.n)
			assert.Equal(t, termsig.Cleared, nt.Kind)
			assert.Equal(t, "upcoming maintenance cleared: {}", nt.Reason)

			flip(t, srv, upcoming, windowPending)
			flip(t, srv, upcoming, windowDone)
			assert.Equal(t, []string{
				"maintenance: upcoming maintenance: SCHEDULED, PENDING, window from 2026-12-01T10:00:00Z to 2026-12-01T11:00:00Z",
				"cleared: upcoming maintenance cleared: COMPLETE",
			}, kinds(stopAndDrain(h.n)))
		})
	}
}

// --- faults ---

func TestMissingUpcomingMaintenanceIsSkipped(t *testing.T) {
	srv := newServer(t)
	srv.Delete(upcoming) // an older metadata server
	h := run(t, srv, fast(srv))
	line := h.logs.waitFor(t, "gcemeta: key not served here; not watching it", "key="+upcoming)
	assert.True(t, strings.HasPrefix(line, "DEBUG"), line)
	flip(t, srv, preempted, "TRUE")
	assert.Equal(t, termsig.Terminate, receive(t, h.n).Kind)
	flip(t, srv, maintenance, "MIGRATE_ON_HOST_MAINTENANCE")
	assert.Equal(t, termsig.Maintenance, receive(t, h.n).Kind)
	assert.Equal(t, 1, srv.Requests(upcoming), "a key that is not served is not polled again")
	assert.NoError(t, h.n.Status()[0].Err, "a missing key is not an error")
	assert.Equal(t, termsig.StateRunning, h.n.Status()[0].State)
	assert.Zero(t, h.logs.count(logFailing))
}

// GCE always has preempted: a 404 for it at start is a fault (a metadata
// server restarting), retried until the key is there, never a reason to
// stop watching it.
func TestMissingPreemptedIsRetried(t *testing.T) {
	srv := newServer(t)
	srv.Delete(preempted)
	h := run(t, srv, fast(srv))
	h.logs.waitFor(t, logFailing, "gcemeta: "+preempted+": ", "not defined")
	var me *gcemeta.Error
	require.ErrorAs(t, h.n.Status()[0].Err, &me)
	assert.Equal(t, preempted, me.Key)
	flip(t, srv, maintenance, "TERMINATE_ON_HOST_MAINTENANCE")
	assert.Equal(t, termsig.Terminate, receive(t, h.n).Kind, "the other keys work meanwhile")
	srv.Set(preempted, "TRUE")
	nt := receive(t, h.n)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Contains(t, nt.Reason, "preempt")
}

func TestNoKeyServedKeepsTrying(t *testing.T) {
	srv := newServer(t)
	for _, k := range []string{preempted, maintenance, upcoming} {
		srv.Delete(k)
	}
	h := run(t, srv, fast(srv))
	h.logs.waitFor(t, logFailing, "not defined")
	assert.Equal(t, termsig.StateRunning, h.n.Status()[0].State)
	srv.Set(preempted, "TRUE")
	assert.Equal(t, termsig.Terminate, receive(t, h.n).Kind)
}

func TestKeyDeletedAfterItWasServedIsRetried(t *testing.T) {
	srv := newServer(t)
	h := run(t, srv, fast(srv))
	awaitPolling(t, srv, preempted)
	srv.Delete(preempted)
	h.logs.waitFor(t, logFailing, "gcemeta: "+preempted+": ", "not defined")
	var me *gcemeta.Error
	require.ErrorAs(t, h.n.Status()[0].Err, &me)
	assert.Equal(t, preempted, me.Key)
	var nd metadata.NotDefinedError
	assert.ErrorAs(t, me, &nd)
	srv.Set(preempted, "TRUE")
	assert.Equal(t, termsig.Terminate, receive(t, h.n).Kind)
	assert.Empty(t, stopAndDrain(h.n))
}

func Test503Burst(t *testing.T) {
	for _, atStart := range []bool{true, false} {
		t.Run(map[bool]string{true: "at start", false: "during long polls"}[atStart], func(t *testing.T) {
			srv := newServer(t)
			if atStart {
				srv.Inject(termsigtest.Fault{Key: preempted, Status: http.StatusServiceUnavailable, Count: 6})
			}
			h := run(t, srv, fast(srv))
			if !atStart {
				awaitPolling(t, srv, preempted)
				srv.Inject(termsigtest.Fault{Key: preempted, Status: http.StatusServiceUnavailable, Count: 6})
				srv.DropWaiting(preempted) // the next requests meet the burst
			}
			h.logs.waitFor(t, logFailing, "503")
			var me *metadata.Error
			if err := h.n.Status()[0].Err; err != nil { // unless it recovered already
				require.ErrorAs(t, err, &me)
				assert.Equal(t, 503, me.Code)
			}
			srv.Set(preempted, "TRUE") // preempted during the burst
			nt := receive(t, h.n)
			assert.Equal(t, termsig.Terminate, nt.Kind)
			h.logs.waitFor(t, logHealthy)
			assert.NoError(t, h.n.Status()[0].Err)
			assert.GreaterOrEqual(t, srv.Requests(preempted), 7)
			assert.Empty(t, stopAndDrain(h.n), "no notice from the 503s")
			assert.Equal(t, 1, h.logs.countWith(logFailing, "503"), "one line per state change, not per request")
		})
	}
}

func TestStatusShowsAnyFailingKey(t *testing.T) {
	srv := newServer(t)
	srv.Inject(termsigtest.Fault{Key: preempted, Status: http.StatusInternalServerError})
	h := run(t, srv, fast(srv))
	h.logs.waitFor(t, logFailing, "500")
	// The other keys work, and say so on every answer; the failing key
	// still shows.
	flip(t, srv, maintenance, "MIGRATE_ON_HOST_MAINTENANCE")
	assert.Equal(t, termsig.Maintenance, receive(t, h.n).Kind)
	flip(t, srv, upcoming, windowPending)
	assert.Equal(t, termsig.Maintenance, receive(t, h.n).Kind)
	var me *gcemeta.Error
	require.ErrorAs(t, h.n.Status()[0].Err, &me)
	assert.Equal(t, preempted, me.Key)

	srv.ClearFaults()
	h.logs.waitFor(t, logHealthy)
	awaitPolling(t, srv, preempted)
	assert.NoError(t, h.n.Status()[0].Err)
}

func TestConnectionDroppedInLongPoll(t *testing.T) {
	srv := newServer(t)
	h := run(t, srv, fast(srv))
	awaitPolling(t, srv, preempted)
	// The next attempts are dropped too, and the VM is preempted while the
	// source cannot get through. They are dropped until the source has
	// seen a failure, not a fixed number of times: net/http retries a GET
	// that fails on a reused connection by itself, on another idle
	// connection if it has one, so that a few drops may never reach the
	// source.
	srv.Inject(termsigtest.Fault{Key: preempted, Drop: true})
	srv.DropWaiting(preempted)
	h.logs.waitFor(t, logFailing, "gcemeta: "+preempted+": ")
	srv.Set(preempted, "TRUE")
	srv.ClearFaults()
	nt := receive(t, h.n)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Empty(t, stopAndDrain(h.n))
}

// After an outage the source reads each key plainly before it long-polls
// again, so that a change made during the outage is seen at once from a
// server that ignores last_etag (and would hold a long poll with the
// ETag from before the outage until timeout_sec: 60 s).
func TestChangeDuringOutageSeenFromServerIgnoringLastETag(t *testing.T) {
	srv := newServer(t)
	srv.IgnoreLastETag(true)
	h := run(t, srv, fast(srv))
	awaitPolling(t, srv, preempted)
	srv.Inject(termsigtest.Fault{Key: preempted, Status: http.StatusServiceUnavailable})
	srv.DropWaiting(preempted)
	h.logs.waitFor(t, logFailing, "503")
	srv.Set(preempted, "TRUE") // during the outage
	back := time.Now()
	srv.ClearFaults()
	nt := receive(t, h.n)
	t.Logf("the change arrived %v after the server came back", time.Since(back))
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Empty(t, stopAndDrain(h.n))
}

func TestServerIgnoringWaitForChangeDoesNotSpin(t *testing.T) {
	const interval = 25 * time.Millisecond
	srv := newServer(t)
	srv.Inject(termsigtest.Fault{NoLongPoll: true})
	cfg := fast(srv)
	cfg.MinInterval = interval
	started := time.Now()
	h := run(t, srv, cfg)
	const reads = 11
	await(t, srv, "reads", func() bool { return srv.Requests(preempted) >= reads })
	took := time.Since(started)
	// The read and the first long poll go at once; then each long poll
	// that was answered is followed MinInterval after it started.
	assert.GreaterOrEqual(t, took, (reads-2)*interval, "requests for one key are MinInterval apart")
	t.Logf("%d reads of one key in %v", reads, took)

	srv.Set(preempted, "TRUE")
	assert.Equal(t, termsig.Terminate, receive(t, h.n).Kind, "changes are still seen")
	r := srv.Requests(preempted)
	await(t, srv, "more reads", func() bool { return srv.Requests(preempted) >= r+3 })
	assert.Empty(t, stopAndDrain(h.n))
	assert.Zero(t, h.logs.count(logFailing), "an early answer is not an error")
}

func TestServerThatNeverAnswers(t *testing.T) {
	srv := newServer(t)
	srv.Inject(termsigtest.Fault{Hang: true})
	cfg := fast(srv)
	cfg.RequestTimeout = 50 * time.Millisecond
	h := run(t, srv, cfg)
	h.logs.waitFor(t, logFailing, "no answer within 50ms")
	err := h.n.Status()[0].Err
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var me *gcemeta.Error
	assert.ErrorAs(t, err, &me)

	srv.Set(preempted, "TRUE")
	srv.ClearFaults() // the server wakes up
	assert.Equal(t, termsig.Terminate, receive(t, h.n).Kind)
	h.logs.waitFor(t, logHealthy)
	assert.Empty(t, stopAndDrain(h.n))
}

func TestLongPollThatNeverEndsIsAbandoned(t *testing.T) {
	srv := newServer(t)
	cfg := fast(srv)
	cfg.WaitTimeout = time.Second
	cfg.RequestTimeout = 50 * time.Millisecond
	h := run(t, srv, cfg)
	awaitPolling(t, srv, preempted)
	// From now on the server takes requests but never answers, as over a
	// connection that died silently.
	srv.Inject(termsigtest.Fault{Key: preempted, Hang: true})
	srv.DropWaiting(preempted)
	// The drop is the first failure; the Notifier logs each new error.
	h.logs.waitFor(t, logFailing, "instance/preempted: no answer within 1.05s")
	assert.Empty(t, stopAndDrain(h.n))
}

func TestBadValuesNeverNotify(t *testing.T) {
	html := "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body>TRUE</body></html>\n"
	for _, tc := range []struct {
		key, bad, good string
		want           termsig.Kind
	}{
		{preempted, "", "TRUE", termsig.Terminate},
		{preempted, html, "TRUE", termsig.Terminate},
		{preempted, "MAYBE", "TRUE", termsig.Terminate},
		{preempted, "TRUE FALSE", "TRUE", termsig.Terminate},
		{preempted, "1", "TRUE", termsig.Terminate},
		{maintenance, "", "MIGRATE_ON_HOST_MAINTENANCE", termsig.Maintenance},
		{maintenance, html, "MIGRATE_ON_HOST_MAINTENANCE", termsig.Maintenance},
		{maintenance, "terminate_on_host_maintenance", "MIGRATE_ON_HOST_MAINTENANCE", termsig.Maintenance},
		{maintenance, "MIGRATE ON HOST MAINTENANCE", "MIGRATE_ON_HOST_MAINTENANCE", termsig.Maintenance},
		{maintenance, `{"event":"TERMINATE"}`, "MIGRATE_ON_HOST_MAINTENANCE", termsig.Maintenance},
		{upcoming, "", windowPending, termsig.Maintenance},
		{upcoming, html, windowPending, termsig.Maintenance},
		{upcoming, "null", windowPending, termsig.Maintenance},
		{upcoming, "[]", windowPending, termsig.Maintenance},
		{upcoming, `{"type":5}`, windowPending, termsig.Maintenance},
		{upcoming, `{"type":"SCHEDULED","window_start_time":"tomorrow"}`, windowPending, termsig.Maintenance},
		{upcoming, `{"something":"else"}`, windowPending, termsig.Maintenance},
		{upcoming, `{"type":"SCHEDULED"`, windowPending, termsig.Maintenance},
	} {
		for _, how := range []string{"value", "page"} {
			if how == "page" && tc.bad == "" {
				continue // the fake's Body cannot be empty; "value" covers it
			}
			t.Run(tc.key+"/"+how+"/"+tc.bad, func(t *testing.T) {
				srv := newServer(t)
				if how == "page" {
					// A 200 page from something in the way, in place of
					// the first answer.
					srv.Inject(termsigtest.Fault{Key: tc.key, Body: tc.bad, Count: 1})
				}
				h := run(t, srv, fast(srv))
				if how == "value" {
					awaitPolling(t, srv, tc.key)
					srv.Set(tc.key, tc.bad) // the server's value itself
				}
				h.logs.waitFor(t, logFailing, "gcemeta: "+tc.key+": ")
				flip(t, srv, tc.key, tc.good)
				nt := receive(t, h.n)
				assert.Equal(t, tc.want, nt.Kind)
				assert.Equal(t, tc.good, nt.Raw)
				assert.NoError(t, h.n.Status()[0].Err)
				assert.Empty(t, stopAndDrain(h.n))
			})
		}
	}
}

// --- Stop ---

// stopLimit is how soon Stop must return, whatever the server does.
const stopLimit = 100 * time.Millisecond

// promptly runs scenario, which returns how long a Stop took, up to three
// times (see internal/timing): a source that waited for the server would
// take its RequestTimeout (seconds) every time.
func promptly(t *testing.T, scenario func(t *testing.T) time.Duration) {
	t.Helper()
	timing.Within(t, stopLimit, 3, func() time.Duration { return scenario(t) })
}

func TestStopWithin100ms(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, srv *gcemetatest.Server, cfg *gcemeta.Config) (ready func())
	}{
		{"idle long poll", func(t *testing.T, srv *gcemetatest.Server, _ *gcemeta.Config) func() {
			return func() { awaitPolling(t, srv, preempted) }
		}},
		{"hung server", func(t *testing.T, srv *gcemetatest.Server, cfg *gcemeta.Config) func() {
			srv.Inject(termsigtest.Fault{Hang: true})
			cfg.RequestTimeout = time.Minute
			return func() { await(t, srv, "requests", func() bool { return srv.Requests(preempted) >= 1 }) }
		}},
		{"slow server", func(t *testing.T, srv *gcemetatest.Server, _ *gcemeta.Config) func() {
			srv.Inject(termsigtest.Fault{Delay: time.Minute})
			return func() { await(t, srv, "requests", func() bool { return srv.Requests(preempted) >= 1 }) }
		}},
		{"backoff after 503", func(t *testing.T, srv *gcemetatest.Server, cfg *gcemeta.Config) func() {
			srv.Inject(termsigtest.Fault{Status: 503})
			*cfg = gcemeta.WithBackoff(*cfg, time.Minute)
			cfg.MaxBackoff = time.Minute
			return func() { await(t, srv, "requests", func() bool { return srv.Requests(preempted) >= 1 }) }
		}},
		{"backoff after dropped connection", func(t *testing.T, srv *gcemetatest.Server, cfg *gcemeta.Config) func() {
			srv.Inject(termsigtest.Fault{Drop: true})
			*cfg = gcemeta.WithBackoff(*cfg, time.Minute)
			cfg.MaxBackoff = time.Minute
			return func() { await(t, srv, "requests", func() bool { return srv.Requests(preempted) >= 1 }) }
		}},
		{"spacing after early answer", func(t *testing.T, srv *gcemetatest.Server, cfg *gcemeta.Config) func() {
			srv.Inject(termsigtest.Fault{NoLongPoll: true})
			cfg.MinInterval = time.Minute
			return func() { await(t, srv, "requests", func() bool { return srv.Requests(preempted) >= 2 }) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			promptly(t, func(t *testing.T) time.Duration {
				srv := gcemetatest.NewServer()
				defer srv.Close()
				cfg := fast(srv)
				ready := tc.setup(t, srv, &cfg)
				n := termsig.New(gcemeta.New(cfg))
				ready()
				start := time.Now()
				n.Stop()
				took := time.Since(start)
				assert.Equal(t, termsig.StateStopped, n.Status()[0].State)
				return took
			})
		})
	}
}

func TestStopWithin100msHalfOpen(t *testing.T) {
	promptly(t, func(t *testing.T) time.Duration {
		// A listener that accepts connections and never reads or
		// writes: the server is up at the TCP level and silent above it.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		var (
			mu    sync.Mutex
			conns []net.Conn
		)
		accepted := make(chan struct{}, 16)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				accepted <- struct{}{}
			}
		}()
		defer func() {
			ln.Close()
			<-done
			for _, c := range conns {
				c.Close()
			}
		}()
		n := termsig.New(gcemeta.New(gcemeta.Config{Host: ln.Addr().String()}))
		for range 3 { // one connection per key
			select {
			case <-accepted:
			case <-time.After(wait):
				t.Fatal("no connection")
			}
		}
		start := time.Now()
		n.Stop()
		return time.Since(start)
	})
}

func TestWatchReturnsCtxErr(t *testing.T) {
	srv := newServer(t)
	n, errc := watchtest.Watch(t, termsig.Config{}, gcemeta.New(fast(srv)))
	awaitPolling(t, srv, preempted)
	n.Stop()
	assert.ErrorIs(t, watchtest.Returned(t, errc), context.Canceled)
}

func TestStopWhileNoticeIsUnread(t *testing.T) {
	// The source waits to hand a notice over (C holds one, and nobody
	// reads it); Stop must still be prompt.
	promptly(t, func(t *testing.T) time.Duration {
		srv := gcemetatest.NewServer()
		defer srv.Close()
		srv.Set(preempted, "TRUE")
		srv.Set(maintenance, "MIGRATE_ON_HOST_MAINTENANCE")
		n, errc := watchtest.Watch(t, termsig.Config{Buffer: 1, Logger: slog.New(slog.DiscardHandler)}, gcemeta.New(fast(srv)))
		awaitPolling(t, srv, upcoming)
		await(t, srv, "reads", func() bool { return srv.Requests(preempted) >= 1 && srv.Requests(maintenance) >= 1 })
		start := time.Now()
		n.Stop()
		assert.ErrorIs(t, watchtest.Returned(t, errc), context.Canceled)
		return time.Since(start)
	})
}

func TestErrorMessage(t *testing.T) {
	e := &gcemeta.Error{Key: preempted, Err: errors.New("boom")}
	assert.Equal(t, "gcemeta: instance/preempted: boom", e.Error())
	assert.Equal(t, "boom", errors.Unwrap(e).Error())
}

// TestSecondChangeIsNotHeldBack: after an answer that carries a new ETag,
// the next long poll goes out at once, so a second change right after the
// first is seen at once, not MinInterval (here an hour) later.
func TestSecondChangeIsNotHeldBack(t *testing.T) {
	srv := newServer(t)
	cfg := fast(srv)
	cfg.MinInterval = time.Hour
	h := run(t, srv, cfg)
	armed := func(after int) func() bool {
		return func() bool { return srv.Requests(maintenance) > after && srv.Waiting(maintenance) == 1 }
	}
	await(t, srv, "first long poll", armed(0))
	before := srv.Requests(maintenance)
	srv.Set(maintenance, "MIGRATE_ON_HOST_MAINTENANCE")
	assert.Equal(t, termsig.Maintenance, receive(t, h.n).Kind)
	await(t, srv, "the next long poll, at once", armed(before))
	srv.Set(maintenance, "NONE")
	assert.Equal(t, termsig.Cleared, receive(t, h.n).Kind)
	assert.Empty(t, stopAndDrain(h.n))
}

// TestServerMakingUpETagsDoesNotSpin: a server that answers at once with
// the same value under a new ETag every time made no change: after the
// read and the first long poll, its requests are MinInterval apart.
func TestServerMakingUpETagsDoesNotSpin(t *testing.T) {
	arrived := make(chan time.Time, 64)
	var mu sync.Mutex
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Metadata-Flavor", "Google")
		if !strings.HasSuffix(r.URL.Path, "/"+preempted) {
			http.NotFound(w, r) // the other keys fail and back off
			return
		}
		mu.Lock()
		requests++
		n := requests
		mu.Unlock()
		w.Header().Set("ETag", fmt.Sprintf("etag-%d", n))
		fmt.Fprint(w, "FALSE")
		select {
		case arrived <- time.Now():
		default:
		}
	}))
	defer srv.Close()
	const interval = 100 * time.Millisecond
	host := strings.TrimPrefix(srv.URL, "http://")
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(gcemeta.New(gcemeta.Config{Host: host, MinInterval: interval}))
	defer n.Stop()
	// The read and the first long poll at once, then one per MinInterval.
	var at []time.Time
	for len(at) < 4 {
		select {
		case ts := <-arrived:
			at = append(at, ts)
		case <-time.After(wait):
			t.Fatalf("only %d requests", len(at))
		}
	}
	assert.Less(t, at[1].Sub(at[0]), interval, "the read and the first long poll at once")
	assert.GreaterOrEqual(t, at[3].Sub(at[1]), 2*interval-interval/10, "then MinInterval apart")
	t.Logf("requests at %v", func() (d []time.Duration) {
		for _, ts := range at {
			d = append(d, ts.Sub(at[0]).Round(time.Millisecond))
		}
		return
	}())
}

// A server that fails every long poll but answers plain reads is still
// backed off: the plain read that follows a failure does not reset the
// backoff, so the long polls come further and further apart.
func TestFailingLongPollsBackOffAcrossPlainReads(t *testing.T) {
	longPolls := make(chan time.Time, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Metadata-Flavor", "Google")
		if !strings.HasSuffix(r.URL.Path, "/"+preempted) {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("wait_for_change") == "true" {
			select {
			case longPolls <- time.Now():
			default:
			}
			http.Error(w, "long polls unsupported", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("ETag", "e1")
		fmt.Fprint(w, "FALSE")
	}))
	defer srv.Close()
	const base = 20 * time.Millisecond
	cfg := gcemeta.WithBackoff(gcemeta.Config{Host: strings.TrimPrefix(srv.URL, "http://"), MaxBackoff: time.Second}, base)
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(gcemeta.New(cfg))
	defer n.Stop()
	var at []time.Time
	for len(at) < 5 {
		select {
		case ts := <-longPolls:
			at = append(at, ts)
		case <-time.After(wait):
			t.Fatalf("%d long polls, want 5", len(at))
		}
	}
	// Waits drawn from the upper half of 20, 40, 80, 160 ms: the last
	// gap is at least 80 ms; reset each time, every gap would be at most
	// 20 ms and the plain read's.
	last := at[4].Sub(at[3])
	assert.GreaterOrEqual(t, last, 4*base, "gaps %v", gaps(at))
}

func gaps(at []time.Time) []time.Duration {
	var d []time.Duration
	for i := 1; i < len(at); i++ {
		d = append(d, at[i].Sub(at[i-1]).Round(time.Millisecond))
	}
	return d
}

package imds_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/termsigtest"
)

var deadline = time.Date(2026, 11, 30, 10, 2, 0, 0, time.UTC)

func TestSpotInterruption(t *testing.T) {
	for _, tc := range []struct {
		action string
		kind   termsig.Kind
	}{
		{"terminate", termsig.Terminate},
		{"stop", termsig.Stop},
		{"hibernate", termsig.Hibernate},
	} {
		t.Run(tc.action, func(t *testing.T) {
			h := start(t, nil, nil)
			h.polls(imdstest.PathInstanceAction, 2)
			h.quiet()
			h.srv.SetInterruption(tc.action, deadline)
			n := h.receive()
			assert.Equal(t, "imds", n.Source)
			assert.Equal(t, tc.kind, n.Kind)
			assert.Equal(t, "spot/instance-action", n.Event)
			assert.Equal(t, "spot interruption: "+tc.action, n.Reason)
			assert.True(t, deadline.Equal(n.Deadline), "deadline %v", n.Deadline)
			assert.JSONEq(t, `{"action":"`+tc.action+`","time":"2026-11-30T10:02:00Z"}`, n.Raw)
			assert.False(t, n.Observed.IsZero())
		})
	}
}

func TestSpotInterruptionAlreadyPendingAtStart(t *testing.T) {
	h := start(t, nil, func(s *imdstest.Server) { s.SetInterruption("terminate", deadline) })
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
}

// The AWS metadata mock recomputes the time on every request: one
// interruption must still be one notice.
func TestSpotInterruptionReportedOnceWhenTimeMoves(t *testing.T) {
	h := start(t, nil, nil)
	h.srv.SetInterruption("terminate", time.Time{})
	first := h.receive()
	h.polls(imdstest.PathInstanceAction, 5)
	h.quiet()

	// A changed action is news.
	h.srv.SetInterruption("stop", time.Time{})
	second := h.receive()
	assert.Equal(t, termsig.Stop, second.Kind)
	assert.NotEqual(t, first.Raw, second.Raw)

	// Gone (404), then back: a new interruption.
	h.srv.ClearInterruption()
	h.polls(imdstest.PathInstanceAction, 2)
	h.quiet()
	h.srv.SetInterruption("stop", time.Time{})
	assert.Equal(t, termsig.Stop, h.receive().Kind)
}

func TestRebalance(t *testing.T) {
	h := start(t, nil, nil)
	h.srv.SetRebalance(deadline)
	n := h.receive()
	assert.Equal(t, termsig.Rebalance, n.Kind)
	assert.Equal(t, "rebalance", n.Event)
	assert.Contains(t, n.Reason, "2026-11-30T10:02:00Z")
	assert.Equal(t, `{"noticeTime":"2026-11-30T10:02:00Z"}`, n.Raw)
	assert.True(t, n.Deadline.IsZero(), "a recommendation has no deadline")
	h.polls(imdstest.PathRebalance, 3)
	h.quiet()

	h.srv.ClearRebalance()
	n = h.receive()
	assert.Equal(t, termsig.Cleared, n.Kind)
	assert.Equal(t, "rebalance", n.Event, "a Cleared notice names the advice it clears")
	assert.Equal(t, "rebalance recommendation withdrawn", n.Reason)
}

func TestScheduledMaintenance(t *testing.T) {
	h := start(t, nil, nil)
	reboot := imdstest.ScheduledEvent{
		Code: "system-reboot", Description: "scheduled reboot", EventID: "instance-event-0d59937288b749b32",
		NotBefore: deadline, NotAfter: deadline.Add(2 * time.Hour),
	}
	retire := imdstest.ScheduledEvent{ // no NotAfter, as IMDS sometimes sends
		Code: "instance-retirement", Description: "retiring", EventID: "instance-event-1",
		NotBefore: deadline.Add(24 * time.Hour),
	}
	h.srv.SetScheduledEvents(reboot, retire)
	a, b := h.receive(), h.receive()
	assert.Equal(t, termsig.Maintenance, a.Kind)
	assert.Equal(t, "scheduled/instance-event-0d59937288b749b32", a.Event)
	assert.Equal(t, "system-reboot: scheduled reboot (instance-event-0d59937288b749b32, until 30 Nov 2026 12:02:00 GMT)", a.Reason)
	assert.True(t, deadline.Equal(a.Deadline))
	assert.Equal(t, "scheduled/instance-event-1", b.Event)
	assert.Equal(t, "instance-retirement: retiring (instance-event-1)", b.Reason)
	assert.True(t, deadline.Add(24*time.Hour).Equal(b.Deadline))
	h.polls(imdstest.PathScheduled, 3)
	h.quiet()

	// Rescheduled: reported again with the new deadline.
	retire.NotBefore = deadline.Add(48 * time.Hour)
	h.srv.SetScheduledEvents(reboot, retire)
	n := h.receive()
	assert.Equal(t, termsig.Maintenance, n.Kind)
	assert.Equal(t, "scheduled/instance-event-1", n.Event)
	assert.True(t, retire.NotBefore.Equal(n.Deadline))

	// Canceled, completed, gone: each Cleared notice names its event.
	stop := imdstest.ScheduledEvent{Code: "instance-stop", Description: "stopping", EventID: "instance-event-2", NotBefore: deadline}
	h.srv.SetScheduledEvents(reboot, retire, stop)
	assert.Equal(t, "scheduled/instance-event-2", h.receive().Event)
	reboot.State = "canceled"
	h.srv.SetScheduledEvents(reboot, retire, stop)
	n = h.receive()
	assert.Equal(t, termsig.Cleared, n.Kind)
	assert.Equal(t, "scheduled/instance-event-0d59937288b749b32", n.Event)
	assert.Equal(t, "scheduled event instance-event-0d59937288b749b32 canceled", n.Reason)
	stop.State = "completed"
	h.srv.SetScheduledEvents(retire, stop)
	n = h.receive()
	assert.Equal(t, termsig.Cleared, n.Kind)
	assert.Equal(t, "scheduled/instance-event-2", n.Event)
	assert.Equal(t, "scheduled event instance-event-2 completed", n.Reason)
	h.srv.SetScheduledEvents()
	n = h.receive()
	assert.Equal(t, termsig.Cleared, n.Kind)
	assert.Equal(t, "scheduled/instance-event-1", n.Event)
	assert.Equal(t, "scheduled event instance-event-1 gone", n.Reason)
	h.polls(imdstest.PathScheduled, 3)
	h.quiet()
}

func TestLifecycleState(t *testing.T) {
	h := start(t, nil, nil)
	h.srv.SetLifecycleState("InService")
	h.polls(imdstest.PathLifecycle, 3)
	h.quiet()
	h.srv.SetLifecycleState("Warmed:Stopped")
	h.polls(imdstest.PathLifecycle, 2)
	h.quiet()

	h.srv.SetLifecycleState("Terminated")
	n := h.receive()
	assert.Equal(t, termsig.Terminate, n.Kind)
	assert.Equal(t, "asg/lifecycle", n.Event)
	assert.Equal(t, "auto scaling: target lifecycle state Terminated", n.Reason)
	assert.True(t, n.Deadline.IsZero())
	h.polls(imdstest.PathLifecycle, 3)
	h.quiet()
}

func TestEventsSelectsPaths(t *testing.T) {
	cfg := imds.Config{Interval: 10 * time.Millisecond, AdvisoryInterval: 10 * time.Millisecond, Events: imds.SpotInterruption}
	h := start(t, &cfg, nil)
	h.polls(imdstest.PathInstanceAction, 3)
	assert.Zero(t, h.srv.Requests(imdstest.PathRebalance))
	assert.Zero(t, h.srv.Requests(imdstest.PathScheduled))
	assert.Zero(t, h.srv.Requests(imdstest.PathLifecycle))
}

func TestUnavailableOffEC2WithoutProbe(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "")
	src := imds.New(imds.Config{Root: t.TempDir()})
	require.ErrorIs(t, src.Available(), termsig.ErrUnavailable)

	// Watch returns at once: on a host that is clearly not EC2 it must not
	// try 169.254.169.254 (no dial, no 250 ms dial timeout, no retries).
	// Ready closes once it has, and Status then says how it ended.
	timing.Within(t, 20*time.Millisecond, 3, func() time.Duration {
		start := time.Now()
		n := quietLog.New(src)
		defer n.Stop()
		waitReady(t, n)
		took := time.Since(start)
		st := n.Status()[0]
		assert.Equal(t, termsig.StateUnavailable, st.State)
		assert.ErrorIs(t, st.Err, termsig.ErrUnavailable)
		assert.ErrorContains(t, st.Err, "not an EC2 instance")
		return took
	})
}

func TestAvailable(t *testing.T) {
	ec2 := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ec2, "sys/class/dmi/id"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ec2, "sys/class/dmi/id/sys_vendor"), []byte("Amazon EC2\n"), 0o644))

	for _, tc := range []struct {
		name     string
		cfg      imds.Config
		env      map[string]string
		unavail  bool
		contains string
	}{
		{name: "ec2 by dmi", cfg: imds.Config{Root: ec2}},
		{name: "not ec2", cfg: imds.Config{Root: t.TempDir()}, unavail: true, contains: "not an EC2 instance"},
		{name: "endpoint env", cfg: imds.Config{Root: t.TempDir()}, env: map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:1"}},
		{name: "endpoint config", cfg: imds.Config{Root: t.TempDir(), Endpoint: "http://127.0.0.1:1"}},
		{name: "disabled", cfg: imds.Config{Root: ec2}, env: map[string]string{"AWS_EC2_METADATA_DISABLED": "true"}, unavail: true, contains: "AWS_EC2_METADATA_DISABLED"},
		{name: "disabled but endpoint given", cfg: imds.Config{Root: ec2, Endpoint: "http://127.0.0.1:1"}, env: map[string]string{"AWS_EC2_METADATA_DISABLED": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "")
			t.Setenv("AWS_EC2_METADATA_DISABLED", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			err := imds.New(tc.cfg).Available()
			if !tc.unavail {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, termsig.ErrUnavailable)
			assert.ErrorContains(t, err, tc.contains)
		})
	}
}

// With the endpoint in the environment, as the SDK reads it, a host that is
// not EC2 watches that endpoint.
func TestEndpointFromEnvironment(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL)
	cfg := fastConfig(srv)
	cfg.Endpoint = ""
	cfg.Root = t.TempDir()
	n := termsig.New(imds.New(cfg))
	defer n.Stop()
	srv.SetInterruption("terminate", deadline)
	select {
	case nt := <-n.C():
		assert.Equal(t, termsig.Terminate, nt.Kind)
	case <-time.After(wait):
		t.Fatal("no notice")
	}
}

func TestDefaultIntervals(t *testing.T) {
	// Not a timing test: the defaults are part of the documented contract.
	assert.Equal(t, time.Second, imds.DefaultInterval)
	assert.Equal(t, 250*time.Millisecond, imds.DefaultFastInterval)
	assert.Equal(t, 3*time.Second, imds.DefaultAdvisoryInterval)
	assert.Equal(t, 30*time.Second, imds.DefaultMaintenanceInterval)
}

func TestNoticeFields(t *testing.T) {
	h := start(t, nil, nil)
	h.srv.SetInterruption("terminate", deadline)
	n := h.receive()
	assert.Nil(t, n.Signal)
	assert.True(t, strings.HasPrefix(n.String(), "imds: terminate (spot interruption: terminate), deadline 2026-11-30T10:02:00Z"))
}

// An endpoint given in Config is used even where AWS_EC2_METADATA_DISABLED
// is set (as in many CI images): Available says so, and the SDK client must
// agree.
func TestConfiguredEndpointIgnoresIMDSDisabled(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	h := start(t, nil, nil)
	h.srv.SetInterruption("terminate", deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
}

// IMDS lists no events as []: a 404 says nothing about the events and must
// not clear them.
func TestScheduled404ClearsNothing(t *testing.T) {
	h := start(t, nil, nil)
	h.srv.SetScheduledEvents(imdstest.ScheduledEvent{Code: "system-reboot", EventID: "e-1", NotBefore: deadline})
	assert.Equal(t, termsig.Maintenance, h.receive().Kind)
	h.srv.Inject(termsigtest.Fault{Key: imdstest.PathScheduled, Status: http.StatusNotFound})
	h.polls(imdstest.PathScheduled, 3)
	h.srv.ClearFaults()
	h.polls(imdstest.PathScheduled, 3)
	h.quiet()
}

// An answer that lists an EventId twice (active and completed) is one
// active event, reported once, not a flapping one.
func TestScheduledDuplicateEventID(t *testing.T) {
	h := start(t, nil, nil)
	h.srv.SetScheduledEvents(
		imdstest.ScheduledEvent{Code: "system-reboot", EventID: "e-1", NotBefore: deadline},
		imdstest.ScheduledEvent{Code: "system-reboot", EventID: "e-1", NotBefore: deadline, State: "completed"},
	)
	assert.Equal(t, termsig.Maintenance, h.receive().Kind)
	h.polls(imdstest.PathScheduled, 4)
	h.quiet()
}

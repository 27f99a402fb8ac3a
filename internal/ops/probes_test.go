package ops_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/termsigtest"
)

func TestHealthzFailsOnceTheLoopHasNotTickedForLongerThanStaleness(t *testing.T) {
	clk := newClock()
	s := start(t, ops.Config{ProbeAddr: "127.0.0.1:0", Staleness: 30 * time.Second, Now: clk.Now})
	s.Tick()
	ticked := clk.Now()
	code, body := get(t, s.ProbeAddr(), "/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "[+]loop ok\nhealthz check passed\n", body)

	clk.Add(30 * time.Second)
	code, _ = get(t, s.ProbeAddr(), "/healthz")
	assert.Equal(t, http.StatusOK, code, "at the staleness, not past it")

	clk.Add(time.Millisecond)
	code, body = get(t, s.ProbeAddr(), "/healthz")
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body, "[-]loop failed: the main loop has not turned since "+ticked.Format(time.RFC3339Nano)+" (30.001s ago, more than 30s)")
	assert.Contains(t, body, "healthz check failed")

	s.Tick()
	code, _ = get(t, s.ProbeAddr(), "/healthz")
	assert.Equal(t, http.StatusOK, code, "turning again")
}

func TestHeartbeatKeepsAnIdleLoopHealthyAndAStoppedLoopFails(t *testing.T) {
	const staleness = 300 * time.Millisecond
	s := start(t, ops.Config{ProbeAddr: "127.0.0.1:0", Staleness: staleness})
	var turns atomic.Int32
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() { // a main loop with nothing else to do
		defer close(stopped)
		for {
			s.Tick()
			turns.Add(1)
			select {
			case <-s.Heartbeat():
			case <-stop:
				return
			}
		}
	}()
	// Longer than the staleness, in heartbeats (a third of it each).
	require.Eventually(t, func() bool { return turns.Load() > 4 }, wait, time.Millisecond)
	code, body := get(t, s.ProbeAddr(), "/healthz")
	assert.Equal(t, http.StatusOK, code, body)

	close(stop)
	<-stopped
	require.Eventually(t, func() bool {
		code, _ := get(t, s.ProbeAddr(), "/healthz")
		return code == http.StatusInternalServerError
	}, wait, time.Millisecond)
}

func TestHeartbeatIsNilWithoutProbes(t *testing.T) {
	s := start(t, ops.Config{MetricsAddr: "127.0.0.1:0"})
	assert.Nil(t, s.Heartbeat(), "an idle program does not wake for nobody")
}

func TestReadyzWaitsForTheNotifierAndEveryCheckNamingEach(t *testing.T) {
	s := start(t, ops.Config{ProbeAddr: "127.0.0.1:0"})
	code, body := get(t, s.ProbeAddr(), "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "[-]notifier failed: not started yet\nreadyz check failed\n", body)

	f := termsigtest.NewFake("imds")
	f.HoldReady()
	n := termsig.New(f)
	defer n.Stop()
	s.Watch(n)
	var nodeErr atomic.Pointer[error]
	noRead := errors.New("no node read yet")
	nodeErr.Store(&noRead)
	s.AddReadyCheck("node", func() error { return *nodeErr.Load() })
	select {
	case <-f.Started():
	case <-time.After(wait):
		t.Fatal("the fake never started")
	}
	code, body = get(t, s.ProbeAddr(), "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "[-]notifier failed: not every source has had its first look\n[-]node failed: no node read yet\nreadyz check failed\n", body)

	f.SetReady()
	select {
	case <-n.Ready():
	case <-time.After(wait):
		t.Fatal("never ready")
	}
	code, body = get(t, s.ProbeAddr(), "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "[+]notifier ok\n[-]node failed: no node read yet\nreadyz check failed\n", body)

	var ok error
	nodeErr.Store(&ok)
	code, body = get(t, s.ProbeAddr(), "/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "[+]notifier ok\n[+]node ok\nreadyz check passed\n", body)
}

func TestAReadyCheckNamedTwiceIsAPanic(t *testing.T) {
	s := start(t, ops.Config{})
	s.AddReadyCheck("node", func() error { return nil })
	assert.PanicsWithValue(t, "termsig: ops: AddReadyCheck: a second check named node", func() {
		s.AddReadyCheck("node", func() error { return nil })
	})
	assert.Panics(t, func() { s.AddReadyCheck("notifier", func() error { return nil }) })
	assert.Panics(t, func() { s.AddReadyCheck("x", nil) })
}

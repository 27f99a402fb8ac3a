package gcemeta_test

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/internal/watchtest"
	"github.com/termsig/termsig/termsigtest"
)

// --- Notice.Event ---

func TestNoticeEvent(t *testing.T) {
	for _, tc := range []struct {
		key, event   string
		value, clear string // clear: "" if the key does not clear
	}{
		{preempted, "preempted", "TRUE", ""},
		{maintenance, "maintenance-event", "MIGRATE_ON_HOST_MAINTENANCE", "NONE"},
		{upcoming, "upcoming-maintenance", windowPending, "{}"},
	} {
		t.Run(tc.event, func(t *testing.T) {
			srv := newServer(t)
			h := run(t, srv, fast(srv))
			flip(t, srv, tc.key, tc.value)
			nt := receive(t, h.n)
			assert.NotEqual(t, termsig.Cleared, nt.Kind)
			assert.Equal(t, tc.event, nt.Event)
			if tc.clear != "" {
				flip(t, srv, tc.key, tc.clear)
				nt = receive(t, h.n)
				assert.Equal(t, termsig.Cleared, nt.Kind)
				assert.Equal(t, tc.event, nt.Event, "a Cleared notice carries the Event it clears")
			}
			assert.Empty(t, stopAndDrain(h.n))
		})
	}
	assert.Equal(t, "preempted", gcemeta.EventPreempted)
	assert.Equal(t, "maintenance-event", gcemeta.EventMaintenance)
	assert.Equal(t, "upcoming-maintenance", gcemeta.EventUpcomingMaintenance)
}

// --- Ready ---

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func awaitReady(t *testing.T, n *termsig.Notifier) {
	t.Helper()
	select {
	case <-n.Ready():
	case <-time.After(wait):
		t.Fatal("Notifier.Ready not closed")
	}
}

// The first look needs the network: the Source has no Traits, so that
// termsig.New does not wait for it.
func TestFirstLookIsRemote(t *testing.T) {
	_, ok := termsig.Source(gcemeta.New(gcemeta.Config{})).(termsig.Describer)
	assert.False(t, ok, "a Traits method")
}

// Ready waits for the first read of every key, including the optional one.
func TestReadyAfterEveryFirstRead(t *testing.T) {
	for _, missing := range []bool{false, true} {
		t.Run(map[bool]string{false: "served", true: "optional key missing"}[missing], func(t *testing.T) {
			srv := newServer(t)
			if missing {
				srv.Delete(upcoming)
			}
			// The first read of upcoming-maintenance hangs until the test
			// lets it go.
			srv.Inject(termsigtest.Fault{Key: upcoming, Hang: true, Count: 1})
			srv.Set(preempted, "TRUE")
			h := run(t, srv, fast(srv))
			awaitPolling(t, srv, preempted)
			awaitPolling(t, srv, maintenance)
			await(t, srv, "the first read of "+upcoming, func() bool { return srv.Requests(upcoming) == 1 })
			assert.False(t, isClosed(h.n.Ready()), "ready before every key was read")

			srv.ClearFaults()
			awaitReady(t, h.n)
			assert.Equal(t, termsig.Terminate, receive(t, h.n).Kind, "the preemption seen by the first read")
		})
	}
}

// A server that does not answer holds Ready back until the first requests
// time out, but never holds New back.
func TestReadyWithHungServer(t *testing.T) {
	const timeout = 200 * time.Millisecond
	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		srv := gcemetatest.NewServer()
		defer srv.Close()
		srv.Inject(termsigtest.Fault{Hang: true})
		cfg := fast(srv)
		cfg.RequestTimeout = timeout
		start := time.Now()
		n := termsig.Config{Logger: newLogRecorder().logger()}.New(gcemeta.New(cfg))
		took := time.Since(start)
		defer n.Stop()
		assert.False(t, isClosed(n.Ready()))
		awaitReady(t, n)
		assert.GreaterOrEqual(t, time.Since(start), timeout, "ready only once the first requests timed out")
		assert.ErrorIs(t, n.Status()[0].Err, context.DeadlineExceeded)
		return took
	})
}

// --- Config validation ---

func TestConfigErrors(t *testing.T) {
	off := t.TempDir() // no DMI files: not GCE
	for _, tc := range []struct {
		name string
		cfg  gcemeta.Config
		env  string // GCE_METADATA_HOST
		want string
	}{
		{"host with scheme", gcemeta.Config{Host: "http://127.0.0.1:1"}, "", `gcemeta: Config.Host "http://127.0.0.1:1" is not a host[:port]`},
		{"host with path", gcemeta.Config{Host: "127.0.0.1:1/x"}, "", `gcemeta: Config.Host "127.0.0.1:1/x" is not a host[:port]`},
		{"host with space", gcemeta.Config{Host: "a b"}, "", `gcemeta: Config.Host "a b" is not a host[:port]`},
		{"host with user", gcemeta.Config{Host: "user@host"}, "", `gcemeta: Config.Host "user@host" is not a host[:port]`},
		{"env host", gcemeta.Config{}, "http://10.0.0.1", `gcemeta: GCE_METADATA_HOST "http://10.0.0.1" is not a host[:port]`},
		{"negative WaitTimeout", gcemeta.Config{Host: "127.0.0.1:1", WaitTimeout: -time.Second}, "", "gcemeta: Config.WaitTimeout is negative (-1s); zero means the default"},
		{"negative RequestTimeout", gcemeta.Config{Host: "127.0.0.1:1", RequestTimeout: -1}, "", "gcemeta: Config.RequestTimeout is negative (-1ns); zero means the default"},
		{"negative MinInterval", gcemeta.Config{Host: "127.0.0.1:1", MinInterval: -time.Second}, "", "gcemeta: Config.MinInterval is negative (-1s); zero means the default"},
		{"negative MaxBackoff", gcemeta.Config{Host: "127.0.0.1:1", MaxBackoff: -time.Second}, "", "gcemeta: Config.MaxBackoff is negative (-1s); zero means the default"},
		{"MinInterval below floor", gcemeta.Config{Host: "127.0.0.1:1", MinInterval: 5 * time.Millisecond}, "", "gcemeta: Config.MinInterval is 5ms, below FloorInterval (10ms): the metadata server would be hammered"},
		{"off GCE too", gcemeta.Config{MinInterval: -time.Second}, "", "gcemeta: Config.MinInterval is negative (-1s); zero means the default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRoundTripper(t, nil) // fails any request
			t.Setenv(gcemeta.HostEnv, tc.env)
			cfg := tc.cfg
			cfg.Root = off
			cfg.HTTPClient = &http.Client{Transport: rt}
			src := gcemeta.New(cfg)

			err := src.Available()
			require.EqualError(t, err, tc.want)
			assert.NotErrorIs(t, err, termsig.ErrUnavailable)
			logs := newLogRecorder()
			n, errc := watchtest.Watch(t, termsig.Config{Logger: logs.logger()}, src)
			require.EqualError(t, watchtest.Returned(t, errc), tc.want)
			logs.waitFor(t, "termsig: source failed", "err="+tc.want)
			st := n.Status()[0]
			assert.Equal(t, termsig.StateFailed, st.State)
			assert.EqualError(t, st.Err, tc.want)
			awaitReady(t, n)
			assert.Empty(t, rt.requests(), "no request with a bad Config")
		})
	}
	t.Run("floor itself", func(t *testing.T) {
		cfg := gcemeta.Config{Host: "127.0.0.1:1", MinInterval: gcemeta.FloorInterval}
		assert.NoError(t, gcemeta.New(cfg).Available())
	})
}

// --- stable errors, one log line per outage ---

// resetServer accepts connections, reads a request and resets the
// connection, as a crashing server or a firewall does: the client's error
// names its own ephemeral port.
func resetServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// refusedAddr returns an address where nothing listens.
func refusedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// countingTransport signals every request on attempts.
type countingTransport struct {
	tr       *http.Transport
	attempts chan struct{}
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case c.attempts <- struct{}{}:
	default:
	}
	return c.tr.RoundTrip(r)
}

func TestOneLinePerOutage(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr func(*testing.T) string
		want string // the failure, after "gcemeta: <key>: "
	}{
		{"refused", refusedAddr, "unreachable: connection refused"},
		{"reset", resetServer, "connection lost: connection reset by peer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := &countingTransport{tr: &http.Transport{}, attempts: make(chan struct{}, 1000)}
			defer ct.tr.CloseIdleConnections()
			logs := newLogRecorder()
			n := termsig.Config{Logger: logs.logger()}.New(gcemeta.New(gcemeta.WithBackoff(gcemeta.Config{
				Host:       tc.addr(t),
				MaxBackoff: gcemeta.FloorInterval,
				HTTPClient: &http.Client{Transport: ct},
				Logger:     logs.logger(),
			}, gcemeta.FloorInterval)))
			for i := range 30 { // ten per key
				select {
				case <-ct.attempts:
				case <-time.After(wait):
					t.Fatalf("%d requests only", i)
				}
			}
			st := n.Status()[0]
			n.Stop()
			require.Error(t, st.Err)
			assert.Regexp(t, "^gcemeta: instance/[a-z-]+: "+regexp.QuoteMeta(tc.want)+"$", st.Err.Error())
			assert.Equal(t, []string{"WARN termsig: source error, retrying source=gcemeta err=" + st.Err.Error()},
				logs.lines(logFailing), "one line for the outage, not one per request or per key")
		})
	}
}

// --- logging ---

func TestNilLoggerIsSlogDefault(t *testing.T) {
	logs := newLogRecorder()
	old := slog.Default()
	slog.SetDefault(logs.logger())
	t.Cleanup(func() { slog.SetDefault(old) })

	srv := newServer(t)
	srv.Set(preempted, "TRUE")
	n := termsig.Config{Logger: newLogRecorder().logger()}.New(gcemeta.New(gcemeta.Config{Host: srv.Host()}))
	defer n.Stop()
	receive(t, n)
	logs.waitFor(t, "gcemeta: value changed", "key="+preempted, "value=TRUE")
}

// --- the termsig.Source contract ---

func TestSourceKeepsContract(t *testing.T) {
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		srv := newServer(t)
		cfg := fast(srv)
		cfg.Logger = slog.New(slog.DiscardHandler)
		return gcemeta.New(cfg), func() { srv.Set(preempted, "TRUE") }
	})
}

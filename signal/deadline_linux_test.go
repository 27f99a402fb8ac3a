package signal_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	ossignal "os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/signal"
	"github.com/termsig/termsig/signal/systemdtest"
	"github.com/termsig/termsig/termsigtest"
)

// The log lines of the lookup.
const (
	msgFound    = "signal: deadline from systemd"
	msgNone     = "signal: no deadline from systemd"
	msgBadEnv   = "signal: no SIGTERM deadline"
	msgRetrying = "termsig: source error, retrying"
	msgHealthy  = "termsig: source healthy again"
)

// sendOnce sends sig to this process once and returns the notice. Once
// termsig.New has returned, the source's handler is installed.
func sendOnce(t *testing.T, n *termsig.Notifier, sig syscall.Signal) termsig.Notice {
	t.Helper()
	require.NoError(t, syscall.Kill(os.Getpid(), sig))
	select {
	case nt := <-n.C():
		require.Equal(t, sig, nt.Signal)
		return nt
	case <-time.After(wait):
		t.Fatalf("no notice of %v", sig)
	}
	return termsig.Notice{}
}

// left returns the time a notice gives, or -1 for none.
func left(nt termsig.Notice) time.Duration {
	if nt.Deadline.IsZero() {
		return -1
	}
	return nt.Deadline.Sub(nt.Observed)
}

// watch starts a Notifier with a signal source configured by c, which
// logs to rec, as does the Notifier.
func watch(t *testing.T, rec *testlog.Recorder, c signal.Config, sigs ...os.Signal) *termsig.Notifier {
	t.Helper()
	c.Logger = rec.Logger()
	n := termsig.Config{Logger: rec.Logger()}.New(c.New(sigs...))
	t.Cleanup(n.Stop)
	return n
}

// waitCall waits until fake has answered more than after calls.
func waitCall(t *testing.T, fake *systemdtest.Systemd, after int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	require.NoError(t, fake.Wait(ctx, func(calls []systemdtest.Call) bool { return len(calls) > after }))
}

// A SIGTERM to a process that systemd started (INVOCATION_ID) gives the
// unit's stop timeout, read over the bus, also to a process that is not
// the unit's main one; the other signals give none.
func TestSIGTERMDeadlineIsTheUnitsStopTimeout(t *testing.T) {
	bus, fake := systemdtest.Start(t, systemdtest.Config{Unit: "app.service", TimeoutStopUSec: 45e6, MainPID: 1})
	t.Setenv("INVOCATION_ID", fake.InvocationID())
	rec := testlog.New()
	n := watch(t, rec, signal.Config{Address: bus.Address()})

	term := sendOnce(t, n, syscall.SIGTERM)
	assert.Equal(t, 45*time.Second, left(term), "Observed + TimeoutStopUSec")
	assert.Equal(t, termsig.Terminate, term.Kind)
	assert.Equal(t, time.Duration(-1), left(sendOnce(t, n, syscall.SIGINT)), "SIGINT is not how the unit stops")
	assert.Equal(t, time.Duration(-1), left(sendOnce(t, n, syscall.SIGHUP)))
	again := sendOnce(t, n, syscall.SIGTERM)
	assert.Equal(t, 45*time.Second, left(again), "every SIGTERM, whoever sends it")

	found := rec.WaitFor(t, msgFound, 1)
	assert.Equal(t, "app.service", testlog.Attr(found, "unit"))
	assert.Equal(t, "45s", testlog.Attr(found, "timeout"))
	calls := fake.Calls()
	require.NotEmpty(t, calls)
	assert.Equal(t, "GetUnitByPID", calls[0].Member)
	assert.Equal(t, uint32(0), calls[0].PID, "PID 0: the caller as the bus sees it")
	assert.Zero(t, rec.CountLevel(slog.LevelWarn))
}

// Without INVOCATION_ID, the lookup still finds a service of which this
// process is the main one (its environment was cleared on the way).
func TestMainProcessOfAServiceGetsTheDeadlineWithoutInvocationID(t *testing.T) {
	bus, _ := systemdtest.Start(t, systemdtest.Config{})
	n := watch(t, testlog.New(), signal.Config{Address: bus.Address()})
	assert.Equal(t, systemdtest.DefaultTimeoutStop, left(sendOnce(t, n, syscall.SIGTERM)))
}

// A unit that is not this process's service gives no deadline: quietly
// when nothing says that systemd started the process, with a warning when
// INVOCATION_ID does.
func TestNoDeadlineFromAUnitThatIsNotThisProcesssService(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        systemdtest.Config
		invocation string // "fake": the fake's own
		warn       bool
	}{
		{"a login session's scope", systemdtest.Config{Unit: "session-4.scope"}, "", false},
		{"a desktop's terminal, under the user's manager", systemdtest.Config{Unit: "user@1000.service", MainPID: 1}, "", false},
		{"a user service: the system's unit is user@UID.service", systemdtest.Config{Unit: "user@1000.service", MainPID: 1}, "00112233445566778899aabbccddeeff", true},
		{"no unit for the PID", systemdtest.Config{Error: systemdtest.ErrNoUnitForPID}, "", false},
		{"no unit for the PID, under systemd", systemdtest.Config{Error: systemdtest.ErrNoUnitForPID}, "fake", true},
		{"access denied", systemdtest.Config{Error: systemdtest.ErrAccessDenied}, "fake", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bus, fake := systemdtest.Start(t, tc.cfg)
			inv := tc.invocation
			if inv == "fake" {
				inv = fake.InvocationID()
			}
			t.Setenv("INVOCATION_ID", inv)
			rec := testlog.New()
			n := watch(t, rec, signal.Config{Address: bus.Address()})
			assert.Equal(t, time.Duration(-1), left(sendOnce(t, n, syscall.SIGTERM)))
			if tc.warn {
				w := rec.WaitFor(t, msgNone, 1)
				assert.Equal(t, slog.LevelWarn, w.Level)
				assert.NotEmpty(t, testlog.Attr(w, "err"))
			} else {
				assert.Zero(t, rec.CountLevel(slog.LevelWarn))
			}
			assert.NoError(t, n.Status()[0].Err, "nothing to retry: not a failure of the source")
			assert.NotEmpty(t, fake.Calls(), "asked")
		})
	}
}

// Stop settings under which systemd never kills the process give no
// deadline, and say why.
func TestNoDeadlineWhenTheUnitIsNeverKilled(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  systemdtest.Config
		why  string
	}{
		{"TimeoutStopSec=infinity", systemdtest.Config{TimeoutStopUSec: systemdtest.Infinity}, "TimeoutStopSec=infinity"},
		{"beyond a time.Duration", systemdtest.Config{TimeoutStopUSec: math.MaxInt64/1000 + 1}, "TimeoutStopSec=infinity"},
		{"SendSIGKILL=no", systemdtest.Config{NoSIGKILL: true}, "SendSIGKILL=no"},
		{"KillMode=none", systemdtest.Config{KillMode: "none"}, "KillMode=none"},
		{"KillMode=process, a child", systemdtest.Config{KillMode: "process", MainPID: 1}, "KillMode=process, and this is not the main process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bus, fake := systemdtest.Start(t, tc.cfg)
			t.Setenv("INVOCATION_ID", fake.InvocationID())
			rec := testlog.New()
			n := watch(t, rec, signal.Config{Address: bus.Address()})
			assert.Equal(t, time.Duration(-1), left(sendOnce(t, n, syscall.SIGTERM)))
			assert.Equal(t, tc.why, testlog.Attr(rec.WaitFor(t, msgNone, 1), "why"))
		})
	}
}

// A KillMode=process service's main process is killed: it has the
// deadline.
func TestKillModeProcessKillsTheMainProcess(t *testing.T) {
	bus, _ := systemdtest.Start(t, systemdtest.Config{KillMode: "process", TimeoutStopUSec: 5e6})
	n := watch(t, testlog.New(), signal.Config{Address: bus.Address()})
	assert.Equal(t, 5*time.Second, left(sendOnce(t, n, syscall.SIGTERM)))
}

// A unit that stops with another signal (KillSignal=SIGINT) gives that
// signal the deadline, and SIGTERM none.
func TestTheUnitsKillSignalHasTheDeadline(t *testing.T) {
	bus, _ := systemdtest.Start(t, systemdtest.Config{KillSignal: syscall.SIGINT, TimeoutStopUSec: 20e6})
	rec := testlog.New()
	n := watch(t, rec, signal.Config{Address: bus.Address()})
	nt := sendOnce(t, n, syscall.SIGINT)
	assert.Equal(t, 20*time.Second, left(nt))
	assert.Equal(t, termsig.Interrupt, nt.Kind, "the kind stays the signal's")
	assert.Equal(t, time.Duration(-1), left(sendOnce(t, n, syscall.SIGTERM)))
	assert.Equal(t, "SIGINT", testlog.Attr(rec.WaitFor(t, msgFound, 1), "signal"))
}

// What the program or the operator says beats what systemd says, and
// systemd is not asked: Config first, then TERMSIG_STOP_TIMEOUT.
func TestExplicitStopTimeoutsBeatSystemd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config time.Duration
		env    string
		want   time.Duration
	}{
		{"Config", 5 * time.Second, "", 5 * time.Second},
		{"the environment, in seconds", 0, "7", 7 * time.Second},
		{"the environment, a duration", 0, "1m30s", 90 * time.Second},
		{"the environment, zero", 0, "0", 0},
		{"Config before the environment", 5 * time.Second, "7", 5 * time.Second},
		{"Config says none", -1, "7", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bus, fake := systemdtest.Start(t, systemdtest.Config{TimeoutStopUSec: 30e6})
			t.Setenv("INVOCATION_ID", fake.InvocationID())
			t.Setenv(signal.StopTimeoutEnv, tc.env)
			n := watch(t, testlog.New(), signal.Config{Address: bus.Address(), StopTimeout: tc.config})
			assert.Equal(t, tc.want, left(sendOnce(t, n, syscall.SIGTERM)))
			n.Stop()
			assert.Empty(t, fake.Calls(), "systemd not asked")
		})
	}
}

// A TERMSIG_STOP_TIMEOUT that cannot be read gives no deadline (systemd's
// included: the operator meant to say something else) and a warning that
// names it.
func TestUnreadableStopTimeoutEnvGivesNoDeadline(t *testing.T) {
	for _, v := range []string{"abc", "-5", "1.5", "99999999999999999999", "\xff"} {
		t.Run(v, func(t *testing.T) {
			bus, fake := systemdtest.Start(t, systemdtest.Config{})
			t.Setenv(signal.StopTimeoutEnv, v)
			rec := testlog.New()
			n := watch(t, rec, signal.Config{Address: bus.Address()})
			assert.Equal(t, time.Duration(-1), left(sendOnce(t, n, syscall.SIGTERM)))
			w := rec.WaitFor(t, msgBadEnv, 1)
			assert.Equal(t, slog.LevelWarn, w.Level)
			assert.Contains(t, testlog.Attr(w, "err"), signal.StopTimeoutEnv)
			n.Stop()
			assert.Empty(t, fake.Calls())
		})
	}
}

// A systemd that does not answer delays neither New nor Stop; a signal
// that comes meanwhile waits for the lookup, at most LookupTimeout, and
// goes without a deadline; the failure shows in Status.
func TestHangingSystemdDelaysNeitherNewNorStop(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	bus, fake := systemdtest.Start(t, systemdtest.Config{Hold: hold})
	t.Setenv("INVOCATION_ID", fake.InvocationID())
	rec := testlog.New()
	c := signal.FastRetry(signal.Config{Address: bus.Address(), LookupTimeout: 300 * time.Millisecond}, time.Hour, time.Hour)

	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		start := time.Now()
		n := watch(t, rec, c)
		took := time.Since(start)
		n.Stop()
		return took
	})

	asked := len(fake.Calls())
	n := watch(t, rec, c)
	waitCall(t, fake, asked)
	start := time.Now()
	nt := sendOnce(t, n, syscall.SIGTERM)
	assert.Equal(t, time.Duration(-1), left(nt))
	assert.Less(t, time.Since(start), wait)
	assert.WithinDuration(t, start, nt.Observed, 100*time.Millisecond, "Observed is when the signal came, not when it was sent on")
	retrying := rec.WaitFor(t, msgRetrying, 1)
	assert.Contains(t, testlog.Attr(retrying, "err"), "GetUnitByPID")

	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		asked := len(fake.Calls())
		n := watch(t, rec, c)
		waitCall(t, fake, asked)
		start := time.Now()
		n.Stop()
		return time.Since(start)
	})
}

// A bus that dies while the lookup waits on it ends the wait at once, and
// one that is down at start is retried: once it is back, the deadline is.
func TestBusThatGoesAway(t *testing.T) {
	t.Run("during the lookup", func(t *testing.T) {
		hold := make(chan struct{})
		defer close(hold)
		bus, fake := systemdtest.Start(t, systemdtest.Config{Hold: hold})
		t.Setenv("INVOCATION_ID", fake.InvocationID())
		c := signal.Config{Address: bus.Address(), LookupTimeout: time.Minute}
		n := watch(t, testlog.New(), signal.FastRetry(c, time.Hour, time.Hour))
		waitCall(t, fake, 0)
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
		require.NoError(t, bus.Kill())
		select {
		case nt := <-n.C():
			assert.Equal(t, time.Duration(-1), left(nt))
		case <-time.After(wait):
			t.Fatal("the SIGTERM still waits for a bus that is gone")
		}
	})
	t.Run("at start, then back", func(t *testing.T) {
		bus, err := systemdtest.StartBus()
		require.NoError(t, err)
		defer bus.Close()
		require.NoError(t, bus.Kill())
		t.Setenv("INVOCATION_ID", "00112233445566778899aabbccddeeff")
		rec := testlog.New()
		c := signal.FastRetry(signal.Config{Address: bus.Address()}, 10*time.Millisecond, 50*time.Millisecond)
		n := watch(t, rec, c)
		assert.Equal(t, time.Duration(-1), left(sendOnce(t, n, syscall.SIGTERM)))
		rec.WaitFor(t, msgRetrying, 1) // refused: the killed daemon's socket is left
		assert.Error(t, n.Status()[0].Err)
		// The socket gone too, as while the bus restarts: once a bus was
		// there, that is not "no bus here".
		require.NoError(t, os.Remove(bus.Socket()))
		assert.Contains(t, testlog.Attr(rec.WaitFor(t, msgRetrying, 2), "err"), "no such file")

		require.NoError(t, bus.Start())
		fake, err := systemdtest.New(bus.Address(), systemdtest.Config{TimeoutStopUSec: 12e6, InvocationID: "00112233445566778899aabbccddeeff", MainPID: 1})
		require.NoError(t, err)
		defer fake.Close()
		rec.WaitFor(t, msgFound, 1)
		rec.WaitFor(t, msgHealthy, 1)
		assert.Equal(t, 12*time.Second, left(sendOnce(t, n, syscall.SIGTERM)))
		assert.NoError(t, n.Status()[0].Err)
	})
	t.Run("no bus at all", func(t *testing.T) {
		t.Setenv("INVOCATION_ID", "00112233445566778899aabbccddeeff")
		rec := testlog.New()
		n := watch(t, rec, signal.Config{Address: "unix:path=" + t.TempDir() + "/none"})
		assert.Equal(t, time.Duration(-1), left(sendOnce(t, n, syscall.SIGTERM)))
		w := rec.WaitFor(t, msgNone, 1)
		assert.True(t, strings.Contains(testlog.Attr(w, "err"), "no system bus"), testlog.Attr(w, "err"))
		assert.NoError(t, n.Status()[0].Err, "no bus is not a failure to retry")
	})
	t.Run("no systemd on it", func(t *testing.T) {
		bus, err := systemdtest.StartBus()
		require.NoError(t, err)
		defer bus.Close()
		t.Setenv("INVOCATION_ID", "00112233445566778899aabbccddeeff")
		rec := testlog.New()
		n := watch(t, rec, signal.FastRetry(signal.Config{Address: bus.Address()}, time.Hour, time.Hour))
		assert.Equal(t, time.Duration(-1), left(sendOnce(t, n, syscall.SIGTERM)))
		assert.Contains(t, testlog.Attr(rec.WaitFor(t, msgRetrying, 1), "err"), "ServiceUnknown")
	})
}

// The source keeps the contract of termsig.Source while it asks systemd.
func TestSourceKeepsContractWhileAskingSystemd(t *testing.T) {
	guard := make(chan os.Signal, 16)
	ossignal.Notify(guard, syscall.SIGUSR2)
	defer ossignal.Stop(guard)
	bus, _ := systemdtest.Start(t, systemdtest.Config{KillSignal: syscall.SIGUSR2})
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		c := signal.Config{Address: bus.Address(), Logger: testlog.New().Logger()}
		return c.New(syscall.SIGUSR2), func() {
			require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR2))
		}
	})
}

// A socket that hangs or speaks nonsense in place of the bus costs the
// lookup no more than LookupTimeout, and the source nothing.
func TestSocketThatIsNotABus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		want  string // in the error reported
		serve func(net.Conn)
	}{
		{"silent", "handshake: context deadline exceeded", func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }},
		{"nonsense", "handshake", func(c net.Conn) {
			_, _ = c.Write(bytes.Repeat([]byte("REJECTED \x00\xff garbage\r\n"), 1000))
			_, _ = io.Copy(io.Discard, c)
		}},
		{"closes", "handshake", func(net.Conn) {}},
		{"endless", "more than 1048576 bytes", func(c net.Conn) {
			line := bytes.Repeat([]byte("x"), 64<<10) // never a newline
			for {
				if _, err := c.Write(line); err != nil {
					return
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "bus")
			l, err := net.Listen("unix", sock)
			require.NoError(t, err)
			var wg sync.WaitGroup
			defer wg.Wait()
			defer l.Close()
			wg.Go(func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					wg.Go(func() {
						defer c.Close()
						tc.serve(c) // until the lookup hangs up
					})
				}
			})
			t.Setenv("INVOCATION_ID", "00112233445566778899aabbccddeeff")
			rec := testlog.New()
			c := signal.Config{Address: "unix:path=" + sock, LookupTimeout: 500 * time.Millisecond}
			n := watch(t, rec, signal.FastRetry(c, time.Hour, time.Hour))
			assert.Equal(t, time.Duration(-1), left(sendOnce(t, n, syscall.SIGTERM)))
			assert.Contains(t, testlog.Attr(rec.WaitFor(t, msgRetrying, 1), "err"), tc.want)
			n.Stop()
		})
	}
}

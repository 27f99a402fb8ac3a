package logind_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
)

// TestStopIsPromptInMoreStates: Stop within 100 ms while the relock
// after a cancel hangs, while a Get hangs, and while the source dials a TCP
// address that does not answer.
func TestStopIsPromptInMoreStates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setUp func(t *testing.T) *termsig.Notifier
	}{
		{"relock-hangs", func(t *testing.T) *termsig.Notifier {
			bus := startBus(t)
			hang := make(chan struct{})
			t.Cleanup(func() { close(hang) })
			relocking := make(chan struct{}, 1)
			p := newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) {
				if n > 1 {
					relocking <- struct{}{}
					<-hang
					return
				}
				p.replyLock(msg)
			}, nil)
			log := testlog.New()
			n := notifier(t, bus.Address(), log)
			<-n.Ready()
			p.emit(true, "poweroff")
			nt := recv(t, n.C())
			require.NoError(t, n.Release(context.Background(), nt))
			p.emit(false, "poweroff")
			recv(t, relocking)
			return n
		}},
		{"get-hangs", func(t *testing.T) *termsig.Notifier {
			bus := startBus(t)
			hang := make(chan struct{})
			t.Cleanup(func() { close(hang) })
			asked := make(chan struct{}, 8)
			newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { p.replyLock(msg) },
				func(p *progLogind, prop string, msg *dbus.Message) {
					asked <- struct{}{}
					<-hang
				})
			n := notifier(t, bus.Address(), nil)
			recv(t, asked)
			return n
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
				n := tc.setUp(t)
				start := time.Now()
				n.Stop()
				return time.Since(start)
			})
		})
	}
}

// TestStopIsPromptWhileDialingTCP: a TCP listener whose accept queue is
// full drops SYNs, so the dial hangs; Stop does not wait for it (the source
// dials with the context).
func TestStopIsPromptWhileDialingTCP(t *testing.T) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	port := sa.(*syscall.SockaddrInet4).Port
	// Fill the accept queue.
	var fillers []net.Conn
	for range 4 {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err != nil {
			break
		}
		fillers = append(fillers, c)
	}
	defer func() {
		for _, c := range fillers {
			c.Close()
		}
	}()
	n := notifier(t, fmt.Sprintf("tcp:host=127.0.0.1,port=%d", port), nil)
	stopped := make(chan struct{})
	start := time.Now()
	go func() { n.Stop(); close(stopped) }()
	select {
	case <-stopped:
		assert.Less(t, time.Since(start), 100*time.Millisecond)
	case <-time.After(time.Second):
		t.Errorf("Stop still waiting after 1 s: the TCP dial ignores the context")
		syscall.Close(fd) // the dial then fails and Watch returns
		<-stopped
		t.Logf("Stop returned %v after it was called, once the listener closed", time.Since(start))
		return
	}
	syscall.Close(fd)
}

// TestStopIsPrompt: Stop returns within 100 ms whatever the source is
// doing: listening, waiting for a consumer that does not read, backing off
// after the bus died, stuck in the handshake with a bus that does not
// answer, or stuck in a call to a logind that does not answer. Timeouts
// and backoffs are an hour, so only cancellation can end them.
func TestStopIsPrompt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setUp func(t *testing.T) (*termsig.Notifier, func())
	}{
		{"listening", func(t *testing.T) (*termsig.Notifier, func()) {
			bus := startBus(t)
			startLogind(t, bus, logindtest.Config{})
			return notifier(t, bus.Address(), nil), func() {}
		}},
		{"consumer-not-reading", func(t *testing.T) (*termsig.Notifier, func()) {
			bus := startBus(t)
			fake := startLogind(t, bus, logindtest.Config{})
			log := testlog.New()
			n := notifier(t, bus.Address(), log)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			require.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return len(all) == 1 }))
			// Buffer 1: the first notice fills C, the source waits to
			// hand over the second.
			require.NoError(t, fake.PrepareForShutdown("poweroff"))
			require.NoError(t, fake.CancelShutdown("poweroff"))
			log.WaitFor(t, "termsig: notice", 1)
			return n, func() {}
		}},
		{"backing-off", func(t *testing.T) (*termsig.Notifier, func()) {
			bus := startBus(t)
			startLogind(t, bus, logindtest.Config{})
			log := testlog.New()
			n := notifier(t, bus.Address(), log)
			require.NoError(t, bus.Kill())
			log.WaitFor(t, logFailing, 1)
			return n, func() {}
		}},
		{"handshake-hangs", func(t *testing.T) (*termsig.Notifier, func()) {
			sock := filepath.Join(t.TempDir(), "bus")
			ln, err := net.Listen("unix", sock)
			require.NoError(t, err)
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := ln.Accept()
				if err == nil {
					accepted <- c
				}
			}()
			n := notifier(t, "unix:path="+sock, nil)
			c := recv(t, accepted)
			return n, func() { c.Close(); ln.Close() }
		}},
		{"logind-hangs", func(t *testing.T) (*termsig.Notifier, func()) {
			bus := startBus(t)
			hold := make(chan struct{})
			fake, err := logindtest.New(bus.Address(), logindtest.Config{HoldInhibit: hold})
			require.NoError(t, err)
			n := notifier(t, bus.Address(), nil)
			return n, func() { close(hold); fake.Close() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
				n, cleanUp := tc.setUp(t)
				defer cleanUp()
				start := time.Now()
				n.Stop()
				return time.Since(start)
			})
		})
	}
}

// notifier runs a logind source on the bus at addr with hour-long timeouts
// and backoff, a buffer of 1, and without waiting long for readiness.
func notifier(t *testing.T, addr string, log *testlog.Recorder) *termsig.Notifier {
	t.Helper()
	if log == nil {
		log = testlog.New()
	}
	c := logind.Fast(logind.Config{Address: addr, RequestTimeout: time.Hour, Logger: log.Logger()}, time.Hour, time.Hour)
	n := termsig.Config{Logger: log.Logger(), Buffer: 1, ReadyTimeout: 10 * time.Millisecond}.New(logind.New(c))
	t.Cleanup(n.Stop)
	return n
}

// newSource is a logind source on the bus at addr, logging to log.
func newSource(addr string, log *testlog.Recorder) *logind.Source {
	return logind.New(logind.Config{Address: addr, Logger: log.Logger()})
}

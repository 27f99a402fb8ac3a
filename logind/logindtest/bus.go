package logindtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// busConfig lets every connection own any name and send anything: the bus
// is private to the test.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
  </policy>
</busconfig>
`

// startTimeout bounds how long dbus-daemon may take to print its address.
const startTimeout = 10 * time.Second

// A Bus is a private dbus-daemon listening on a UNIX socket in a temporary
// directory: a system bus of the test's own. Point the code under test at
// it with its Address (logind.Config.Address, or DBUS_SYSTEM_BUS_ADDRESS).
//
// It needs the dbus-daemon program (Debian's package dbus).
type Bus struct {
	dir  string
	sock string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// ErrNoDaemon is returned by [StartBus] when dbus-daemon is not installed.
var ErrNoDaemon = errors.New("logindtest: dbus-daemon not found (install the dbus package: apt-get install -y dbus)")

// StartBus starts a dbus-daemon on a new socket and returns once it
// accepts connections. Close it when done.
func StartBus() (*Bus, error) {
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		return nil, ErrNoDaemon
	}
	// A short directory: a socket's path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "termsig-bus")
	if err != nil {
		return nil, err
	}
	b := &Bus{dir: dir, sock: filepath.Join(dir, "bus")}
	cfg := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(busConfig, b.sock)), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := b.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return b, nil
}

// Address returns the bus's D-Bus address, such as
// "unix:path=/tmp/termsig-bus123/bus". It stays the same across Kill and
// Start.
func (b *Bus) Address() string { return "unix:path=" + b.sock }

// Socket returns the path of the bus's socket.
func (b *Bus) Socket() string { return b.sock }

// Start starts the daemon again after Kill, on the same address. It
// returns once the daemon accepts connections; it is an error if it runs.
func (b *Bus) Start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return errors.New("logindtest: bus is running")
	}
	// A daemon that was killed leaves its socket behind.
	if err := os.Remove(b.sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	cmd := exec.Command("dbus-daemon", "--nofork", "--nopidfile", "--print-address",
		"--config-file="+filepath.Join(b.dir, "bus.conf"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("logindtest: start dbus-daemon: %w", err)
	}
	// The daemon prints its address once it listens.
	line := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(out).ReadString('\n')
		line <- err
	}()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case err = <-line:
	case <-t.C:
		err = errors.New("no address printed in " + startTimeout.String())
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("logindtest: dbus-daemon did not start: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	b.cmd, b.done = cmd, done
	return nil
}

// Kill kills the daemon with SIGKILL, as a crash would, and waits until it
// has exited: every connection to it is cut. Start brings it back. Killing
// a bus that is not running does nothing.
func (b *Bus) Kill() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return nil
	}
	err := b.cmd.Process.Kill()
	<-b.done
	b.cmd, b.done = nil, nil
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	return err
}

// Close kills the daemon and removes its directory.
func (b *Bus) Close() error {
	err := b.Kill()
	return errors.Join(err, os.RemoveAll(b.dir))
}

// Start starts a Bus and a fake Logind on it configured by c, for a test:
// both are closed when tb ends, and tb fails at once if either cannot
// start (dbus-daemon missing included).
func Start(tb testing.TB, c Config) (*Bus, *Logind) {
	tb.Helper()
	bus, err := StartBus()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { bus.Close() })
	l, err := New(bus.Address(), c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return bus, l
}

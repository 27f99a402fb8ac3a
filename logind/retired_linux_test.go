package logind_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
)

// TestLogindThatAnsweredIsNotUnavailable: a logind that granted a lock and
// then left is a transient failure, not "unavailable". (Found by review.)
func TestLogindThatAnsweredIsNotUnavailable(t *testing.T) {
	bus := startBus(t)
	newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) {
		if n == 1 {
			if _, err := p.conn.ReleaseName(logindtest.BusName); err != nil {
				t.Error(err)
			}
		}
		p.replyLock(msg)
	}, nil)
	log := testlog.New()
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger()}, time.Millisecond, 20*time.Millisecond)))
	defer n.Stop()
	<-n.Ready()
	st := n.Status()[0]
	assert.Equal(t, termsig.StateRunning, st.State, "retired after logind granted a lock: %v", st.Err)
}

// TestRootWithBusDownAtStartIsTransient: a bus whose socket exists but
// refuses at start is retried, not taken for "no system bus" because
// another entry of the address is missing. (Found by review.)
func TestRootWithBusDownAtStartIsTransient(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "run", "dbus")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "system_bus_socket"), Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	ln.Close() // the socket stays; connecting to it is refused
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "")
	log := testlog.New()
	src := logind.New(logind.Fast(logind.Config{Root: root, Logger: log.Logger()}, time.Millisecond, 20*time.Millisecond))
	require.NoError(t, src.Available())
	n := termsig.Config{Logger: log.Logger()}.New(src)
	defer n.Stop()
	<-n.Ready()
	st := n.Status()[0]
	assert.Equal(t, termsig.StateRunning, st.State, "retired while the bus's socket exists: %v", st.Err)
}

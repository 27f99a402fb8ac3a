package logind_test

import (
	"os"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/logind"
)

// TestForgedFdsToTheLockConnectionLeakNone: descriptors that some process
// sends the lock's own connection while Inhibit waits are closed as they
// come. (Found by review.)
func TestForgedFdsToTheLockConnectionLeakNone(t *testing.T) {
	bus := startBus(t)
	lockConn := make(chan string, 1)
	goAhead := make(chan struct{})
	newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) {
		if n == 1 {
			sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
			lockConn <- sender
			<-goAhead
		}
		p.replyLock(msg)
	}, nil)
	log := testlog.New()
	c := logind.Config{Address: bus.Address(), Logger: log.Logger()}
	n := termsig.Config{Logger: log.Logger(), ReadyTimeout: time.Millisecond}.New(logind.New(c))
	defer n.Stop()
	victim := recv(t, lockConn)

	rogue, err := dbus.Connect(bus.Address())
	require.NoError(t, err)
	defer rogue.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	const planted = 50
	before := openFds(t)
	for range planted {
		msg := shutdownSignal(victim, "PrepareForShutdown", dbus.UnixFD(w.Fd()))
		require.NoError(t, rogue.Send(msg, nil).Err)
	}
	w.Close()
	var names []string // a round trip: the bus has passed them on
	require.NoError(t, rogue.BusObject().Call("org.freedesktop.DBus.ListNames", 0).Store(&names))
	close(goAhead)
	<-n.Ready()
	select {
	case <-eof(r):
	case <-time.After(time.Second):
		t.Errorf("descriptors sent to the lock's connection are never closed: %d open before, %d after, with the lock's connection closed", before, openFds(t))
	}
}

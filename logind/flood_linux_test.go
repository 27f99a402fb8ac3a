package logind_test

import (
	"slices"
	"strings"
	"sync/atomic"
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

// TestFloodBeforeTheOwnerIsKnownLosesNothingOfLoginds: logind's name is
// learnt before the lock is asked for, so a flood of forged signals while
// Inhibit is slow is dropped by the filter and cannot push logind's own
// out of the queue. (Found by review.)
func TestFloodBeforeTheOwnerIsKnownLosesNothingOfLoginds(t *testing.T) {
	bus := startBus(t)
	lockConn := make(chan string, 1)
	goAhead := make(chan struct{})
	var preparing atomic.Bool
	p := newProgLogind(t, bus.Address(),
		func(p *progLogind, n int, msg *dbus.Message) {
			sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
			lockConn <- sender
			<-goAhead
			// A shutdown began while polkit was asked: logind refuses.
			p.replyErr(msg, logindtest.ErrOperationInProgress)
		},
		func(p *progLogind, prop string, msg *dbus.Message) {
			if prop == "PreparingForShutdown" {
				p.reply(msg, dbus.MakeVariant(preparing.Load()))
				return
			}
			p.defaultGet(prop, msg)
		})
	log := testlog.New()
	c := logind.Config{Address: bus.Address(), Logger: log.Logger()}
	n := termsig.Config{Logger: log.Logger(), ReadyTimeout: time.Millisecond}.New(logind.New(c))
	defer n.Stop()
	lock := recv(t, lockConn)

	rogue, err := dbus.Connect(bus.Address())
	require.NoError(t, err)
	defer rogue.Close()
	var names []string
	require.NoError(t, rogue.BusObject().Call("org.freedesktop.DBus.ListNames", 0).Store(&names))
	skip := []string{rogue.Names()[0], p.conn.Names()[0], lock}
	var victims []string
	for _, name := range names {
		if strings.HasPrefix(name, ":") && !slices.Contains(skip, name) {
			victims = append(victims, name)
		}
	}
	require.Len(t, victims, 1, "the source's listening connection")
	for range 1100 {
		require.NoError(t, rogue.Send(shutdownSignal(victims[0], "PrepareForShutdown", true), nil).Err)
	}
	require.NoError(t, rogue.BusObject().Call("org.freedesktop.DBus.ListNames", 0).Store(&names))
	preparing.Store(true)
	p.emit(true, "reboot")
	close(goAhead)

	nt := recv(t, n.C())
	assert.Equal(t, termsig.Reboot, nt.Kind, "%v", nt)
	assert.Equal(t, "shutdown/reboot", nt.Event)
}

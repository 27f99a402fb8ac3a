package logind_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
)

// With a consumer that reads nothing until the end (Buffer 1), every
// shutdown and cancel of a burst is handed over once, in order, each
// Cleared with its own shutdown's Event.
func TestSlowConsumerGetsEveryNoticeOnceInOrder(t *testing.T) {
	bus := startBus(t)
	fake := startLogind(t, bus, logindtest.Config{})
	log := testlog.New()
	src := logind.New(logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger()}, time.Millisecond, 20*time.Millisecond))
	n := termsig.Config{Logger: log.Logger(), Buffer: 1}.New(src)
	defer n.Stop()
	const rounds = 20
	typs := []string{"poweroff", "reboot"}
	for i := range rounds {
		require.NoError(t, fake.PrepareForShutdown(typs[i%2]))
		require.NoError(t, fake.CancelShutdown(typs[i%2]))
	}
	var got []string
	for range 2 * rounds {
		nt := recv(t, n.C())
		got = append(got, fmt.Sprintf("%v %s", nt.Kind, nt.Event))
	}
	for i := range rounds {
		assert.Equal(t, fmt.Sprintf("%v shutdown/%s", termsig.Cleared, typs[i%2]), got[2*i+1], "round %d: %v", i, got)
		assert.NotEqual(t, termsig.Cleared.String(), got[2*i][:len(termsig.Cleared.String())], "round %d", i)
	}
	n.Stop() // a notice still waiting would be put in C's buffer, which has room
	for nt := range n.C() {
		t.Errorf("extra notice %v", nt)
	}
}

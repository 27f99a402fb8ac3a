package logind_test

import (
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

// TestInhibitThatNeverAnswersStillHears: an Inhibit that never answers
// (a stuck polkit) costs the lock, not the hearing: the shutdown is still
// a notice. (Found by review: the session ended and nothing listened.)
func TestInhibitThatNeverAnswersStillHears(t *testing.T) {
	bus := startBus(t)
	hold := make(chan struct{})
	fake, err := logindtest.New(bus.Address(), logindtest.Config{HoldInhibit: hold})
	require.NoError(t, err)
	t.Cleanup(func() { close(hold); fake.Close() })
	log := testlog.New()
	c := logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger(), CallTimeout: 100 * time.Millisecond}, 10*time.Millisecond, 50*time.Millisecond)
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(c))
	defer n.Stop()
	<-n.Ready()
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	select {
	case nt := <-n.C():
		assert.Equal(t, termsig.Terminate, nt.Kind)
	case <-time.After(3 * time.Second):
		t.Fatalf("no notice 3 s after logind announced the shutdown (status: %+v); the source is deaf while Inhibit goes unanswered", n.Status()[0])
	}
}

// TestInhibitWrongAnswerStillHears: the same for an Inhibit that answers
// something other than a descriptor.
func TestInhibitWrongAnswerStillHears(t *testing.T) {
	bus := startBus(t)
	p := newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { p.reply(msg, "fd") }, nil)
	log := testlog.New()
	c := logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger()}, 10*time.Millisecond, 50*time.Millisecond)
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(c))
	defer n.Stop()
	<-n.Ready()
	p.emit(true, "poweroff")
	select {
	case nt := <-n.C():
		assert.Equal(t, termsig.Terminate, nt.Kind)
	case <-time.After(3 * time.Second):
		t.Fatalf("no notice 3 s after logind announced the shutdown (status: %v)", n.Status()[0].Err)
	}
}

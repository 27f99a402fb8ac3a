package logind_test

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/logind"
)

// TestLockInFlightAtStopIsClosed: Stop while Inhibit's answer is on its
// way: whatever the timing, the lock logind handed out does not outlive
// Watch. (Found by review: an answer read after the call gave up was
// dropped by godbus with its descriptor open, a lock nobody could
// release.)
func TestLockInFlightAtStopIsClosed(t *testing.T) {
	bus := startBus(t)
	calls := make(chan *dbus.Message, 1)
	p := newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { calls <- msg }, nil)
	const trials = 400
	var locks []*os.File
	defer func() {
		for _, r := range locks {
			r.Close()
		}
	}()
	for i := range trials {
		src := logind.New(logind.Config{Address: bus.Address(), Logger: slog.New(slog.DiscardHandler)})
		n := termsig.Config{Logger: slog.New(slog.DiscardHandler), ReadyTimeout: time.Millisecond}.New(src)
		msg := recv(t, calls)
		// Spread Stop over 0 to 400 µs after the answer is sent.
		r := p.replyLock(msg)
		locks = append(locks, r)
		<-time.After(time.Duration(i%40) * 10 * time.Microsecond)
		n.Stop()
	}
	var ends []<-chan struct{}
	for _, r := range locks {
		ends = append(ends, eof(r))
	}
	deadline := time.After(time.Second)
wait:
	for _, end := range ends {
		select {
		case <-end:
		case <-deadline:
			break wait
		}
	}
	leaked := 0
	for _, end := range ends {
		select {
		case <-end:
		default:
			leaked++
		}
	}
	if leaked > 0 {
		t.Errorf("%d of %d locks answered around Stop are still held after Stop returned (descriptors open here: %d)", leaked, trials, openFds(t))
	}
}

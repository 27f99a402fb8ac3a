//go:build linux

package logind_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/logind"
)

// A logind whose ScheduledShutdown keeps changing (an operator who
// reschedules, a logind that misbehaves) while the consumer does not read
// C: the advice still waiting is replaced by the latest, so the queue
// stays bounded (C's buffer, the Notifier's hand-off, the notice being
// sent and the latest), and the consumer, once it reads, soon has the
// current schedule.
func TestScheduleChangesWhileTheConsumerDoesNotReadQueueOnlyTheLatest(t *testing.T) {
	bus := startBus(t)
	const changes = 3000
	base := uint64(time.Now().Add(time.Hour).UnixMicro())
	var reads atomic.Int64
	settled := make(chan struct{})
	var once sync.Once
	newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { p.replyLock(msg) },
		func(p *progLogind, prop string, msg *dbus.Message) {
			if prop != "ScheduledShutdown" {
				p.defaultGet(prop, msg)
				return
			}
			k := reads.Add(1)
			if k >= changes {
				k = changes
				once.Do(func() { close(settled) })
			}
			p.reply(msg, dbus.MakeVariant(st{"poweroff", base + uint64(k)*1e6}))
		})
	n, _ := watch(t, bus.Address(), logind.Config{ScheduledInterval: time.Microsecond})
	select {
	case <-settled:
	case <-time.After(30 * time.Second):
		t.Fatalf("only %d reads", reads.Load())
	}
	final := time.UnixMicro(int64(base + changes*1e6))
	count := 0
	for {
		nt := recv(t, n.C())
		count++
		if nt.Deadline.Equal(final) {
			break
		}
	}
	t.Logf("%d notices queued for one schedule that changed %d times", count, changes)
	assert.LessOrEqual(t, count, termsig.DefaultBuffer+3,
		"advice that a later read replaced is still queued: the queue grows with every change")
}

// Upstream systemd's ScheduledShutdown shows logind's delayed action, a
// sleep included, while delay locks hold it (src/login/logind-dbus.c,
// property_get_scheduled_shutdown): a suspend is no scheduled shutdown,
// and gives no advice.
func TestSuspendHeldByDelayLocksIsNoScheduledShutdown(t *testing.T) {
	bus := startBus(t)
	answers := make(chan func(p *progLogind, msg *dbus.Message), 4)
	newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { p.replyLock(msg) }, getSchedule(answers))
	n, _ := watch(t, bus.Address(), logind.Config{})
	answers <- scheduleAnswer(st{"suspend", uint64(time.Now().Add(5 * time.Second).UnixMicro())})
	answers <- scheduleAnswer(st{"reboot", uint64(time.Now().Add(time.Hour).UnixMicro())})
	nt := recv(t, n.C())
	assert.Equal(t, "scheduled/reboot", nt.Event, "the first advice should be the reboot's, got %v %q", nt.Kind, nt.Event)
}

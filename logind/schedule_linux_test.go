package logind_test

import (
	"context"
	"math"
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

// A scheduler is a logind that schedules shutdowns, as `shutdown -h +5`
// and `shutdown -c` ask it to: the fake or the real one.
type scheduler interface {
	ScheduleShutdown(typ string, at time.Time) error
	CancelScheduledShutdown() (bool, error)
}

// A backend starts a logind for a test and returns its bus's address.
type backend struct {
	name string
	// signals: it sends PropertiesChanged for ScheduledShutdown.
	signals bool
	start   func(t *testing.T, delay time.Duration) (string, scheduler)
}

var backends = []backend{
	{"fake", false, func(t *testing.T, delay time.Duration) (string, scheduler) {
		bus := startBus(t)
		return bus.Address(), startLogind(t, bus, logindtest.Config{InhibitDelayMax: delay})
	}},
	{"fake/PropertiesChanged", true, func(t *testing.T, delay time.Duration) (string, scheduler) {
		bus := startBus(t)
		return bus.Address(), startLogind(t, bus, logindtest.Config{InhibitDelayMax: delay, EmitScheduledChanges: true})
	}},
	{"real", false, func(t *testing.T, delay time.Duration) (string, scheduler) {
		bus, l, _ := logindtest.StartReal(t, logindtest.RealConfig{InhibitDelayMax: delay})
		return bus.Address(), l
	}},
}

// pollEvery is the ScheduledInterval of the tests: a logind that sends no
// signal for ScheduledShutdown is read this often.
const pollEvery = 10 * time.Millisecond

// watch runs a Notifier with a logind source on the bus at address, and
// returns once the source has had its first look.
func watch(t *testing.T, address string, c logind.Config) (*termsig.Notifier, *testlog.Recorder) {
	t.Helper()
	log := testlog.New()
	c.Address = address
	if c.Logger == nil {
		c.Logger = log.Logger()
	}
	if c.ScheduledInterval == 0 {
		c.ScheduledInterval = pollEvery
	}
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(logind.Fast(c, time.Millisecond, 20*time.Millisecond)))
	t.Cleanup(n.Stop)
	select {
	case <-n.Ready():
	case <-time.After(wait):
		t.Fatal("source not ready")
	}
	return n, log
}

// usec is at as logind keeps it: in µs.
func usec(at time.Time) time.Time { return time.UnixMicro(at.UnixMicro()) }

// A scheduled shutdown is advice: Maintenance with the scheduled time as
// Deadline and the type in the Event; a new time for it is a new notice
// for the same Event; another type clears the first Event; cancelled, it
// is Cleared.
func TestScheduledShutdownIsAdvice(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			addr, l := b.start(t, 0)
			c := logind.Config{}
			if b.signals {
				c.ScheduledInterval = time.Hour // only the signal can tell in time
			}
			n, _ := watch(t, addr, c)

			at := time.Now().Add(time.Hour)
			before := time.Now()
			require.NoError(t, l.ScheduleShutdown("poweroff", at))
			nt := recv(t, n.C())
			t.Logf("advice %v after ScheduleShutdown", time.Since(before).Round(time.Microsecond))
			assert.Equal(t, termsig.Maintenance, nt.Kind)
			assert.Equal(t, logind.Name, nt.Source)
			assert.Equal(t, "scheduled/poweroff", nt.Event)
			assert.True(t, nt.Deadline.Equal(usec(at)), "Deadline %v, scheduled %v", nt.Deadline, usec(at))
			assert.Contains(t, nt.Reason, "poweroff scheduled")

			later := at.Add(time.Minute)
			require.NoError(t, l.ScheduleShutdown("poweroff", later))
			nt = recv(t, n.C())
			assert.Equal(t, termsig.Maintenance, nt.Kind)
			assert.Equal(t, "scheduled/poweroff", nt.Event)
			assert.True(t, nt.Deadline.Equal(usec(later)), "the new time: Deadline %v, scheduled %v", nt.Deadline, usec(later))

			require.NoError(t, l.ScheduleShutdown("reboot", at))
			cl := recv(t, n.C())
			assert.Equal(t, termsig.Cleared, cl.Kind)
			assert.Equal(t, "scheduled/poweroff", cl.Event)
			nt = recv(t, n.C())
			assert.Equal(t, termsig.Maintenance, nt.Kind)
			assert.Equal(t, "scheduled/reboot", nt.Event)

			cancelled, err := l.CancelScheduledShutdown()
			require.NoError(t, err)
			require.True(t, cancelled)
			cl = recv(t, n.C())
			assert.Equal(t, termsig.Cleared, cl.Kind)
			assert.Equal(t, "scheduled/reboot", cl.Event)
			assert.Equal(t, 5, n.Status()[0].Notices)
		})
	}
}

// A shutdown scheduled before the program starts is in the first look: on
// C when termsig.New returns.
func TestScheduledShutdownIsInTheFirstLook(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			addr, l := b.start(t, 0)
			at := time.Now().Add(time.Hour)
			require.NoError(t, l.ScheduleShutdown("halt", at))
			n := termsig.Config{Logger: testlog.New().Logger()}.New(logind.New(logind.Config{Address: addr, ScheduledInterval: time.Hour}))
			defer n.Stop()
			select {
			case nt := <-n.C():
				assert.Equal(t, termsig.Maintenance, nt.Kind)
				assert.Equal(t, "scheduled/halt", nt.Event)
				assert.True(t, nt.Deadline.Equal(usec(at)))
			default:
				t.Fatal("no notice on C when New returned")
			}
		})
	}
}

// When the scheduled time comes, logind announces the shutdown: the
// imminent notice follows the advice, with the delay lock held; Release
// lets logind go on (the real one then starts reboot.target).
func TestScheduledShutdownFiresTheImminentNotice(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			const delay = 3 * time.Second
			var addr string
			var l scheduler
			var sd *logindtest.Systemd
			if b.name == "real" {
				var bus *logindtest.Bus
				bus, l, sd = logindtest.StartReal(t, logindtest.RealConfig{InhibitDelayMax: delay})
				addr = bus.Address()
			} else {
				addr, l = b.start(t, delay)
			}
			n, _ := watch(t, addr, logind.Config{})
			at := time.Now().Add(300 * time.Millisecond)
			require.NoError(t, l.ScheduleShutdown("reboot", at))
			var nt termsig.Notice
			for nt = recv(t, n.C()); nt.Kind == termsig.Maintenance; nt = recv(t, n.C()) {
				assert.Equal(t, "scheduled/reboot", nt.Event)
			}
			t.Logf("the shutdown announced %v after its scheduled time", time.Since(at).Round(time.Millisecond))
			require.True(t, nt.Kind.Imminent(), "%v", nt)
			assert.False(t, nt.Observed.Before(usec(at)), "announced before its time")
			assert.Equal(t, delay, nt.Deadline.Sub(nt.Observed))
			assert.Contains(t, nt.Reason, "delay lock held")
			if sd != nil {
				assert.Empty(t, sd.Jobs(), "logind went on while the lock is held")
			}
			released := time.Now()
			require.NoError(t, n.Release(context.Background(), nt))
			if sd != nil {
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				job, err := sd.WaitJob(ctx, "reboot.target")
				require.NoError(t, err)
				t.Logf("reboot.target started %v after Release", job.At.Sub(released).Round(time.Microsecond))
			}
		})
	}
}

// A dry run (`shutdown --dry-run`, ScheduleShutdown("dry-poweroff")) shows
// as a poweroff in ScheduledShutdown; when its time comes logind does
// nothing but drop it: advice, then Cleared, no imminent notice.
func TestDryRunScheduleIsClearedWhenDue(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			addr, l := b.start(t, 0)
			n, _ := watch(t, addr, logind.Config{NoLock: true})
			at := time.Now().Add(200 * time.Millisecond)
			require.NoError(t, l.ScheduleShutdown("dry-poweroff", at))
			nt := recv(t, n.C())
			assert.Equal(t, termsig.Maintenance, nt.Kind)
			assert.Equal(t, "scheduled/poweroff", nt.Event)
			cl := recv(t, n.C())
			assert.Equal(t, termsig.Cleared, cl.Kind)
			assert.Equal(t, "scheduled/poweroff", cl.Event)
			assert.False(t, cl.Observed.Before(usec(at)), "cleared before its time")
		})
	}
}

// getSchedule is a programmable logind's Get that answers
// ScheduledShutdown with what the test puts in answers, one per read,
// then with none scheduled.
func getSchedule(answers chan func(p *progLogind, msg *dbus.Message)) func(p *progLogind, prop string, msg *dbus.Message) {
	return func(p *progLogind, prop string, msg *dbus.Message) {
		if prop != "ScheduledShutdown" {
			p.defaultGet(prop, msg)
			return
		}
		select {
		case answer := <-answers:
			answer(p, msg)
		default:
			p.reply(msg, dbus.MakeVariant(st{"", math.MaxUint64}))
		}
	}
}

func scheduleAnswer(v any) func(p *progLogind, msg *dbus.Message) {
	return func(p *progLogind, msg *dbus.Message) { p.reply(msg, dbus.MakeVariant(v)) }
}

// st is a (st), as logind sends ScheduledShutdown.
type st struct {
	Type string
	USec uint64
}

// Answers for ScheduledShutdown that do not parse change nothing: no
// advice from them, and no Cleared of advice sent before (a bad answer is
// not "nothing scheduled"). A type that is not a clean word still counts
// as a scheduled shutdown, without the type in the Event.
func TestScheduledShutdownBadAnswersChangeNothing(t *testing.T) {
	bus := startBus(t)
	answers := make(chan func(p *progLogind, msg *dbus.Message), 16)
	newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { p.replyLock(msg) }, getSchedule(answers))
	at := uint64(time.Now().Add(time.Hour).UnixMicro())
	answers <- scheduleAnswer(st{"poweroff", at})
	n, _ := watch(t, bus.Address(), logind.Config{})
	nt := recv(t, n.C())
	require.Equal(t, "scheduled/poweroff", nt.Event, "read at start")
	for _, bad := range []func(p *progLogind, msg *dbus.Message){
		scheduleAnswer("poweroff"),
		scheduleAnswer([]any{"poweroff", at}), // av, not (st)
		scheduleAnswer(struct{ Type string }{"poweroff"}),
		scheduleAnswer(struct{ Type, When string }{"poweroff", "soon"}),
		scheduleAnswer(struct {
			USec uint64
			Type string
		}{at, "poweroff"}),
		scheduleAnswer(uint64(0)),
		func(p *progLogind, msg *dbus.Message) { p.replyErr(msg, "org.freedesktop.DBus.Error.AccessDenied") },
		func(p *progLogind, msg *dbus.Message) { p.reply(msg) },
		func(p *progLogind, msg *dbus.Message) { p.reply(msg, "poweroff", at) },
	} {
		answers <- bad
	}
	// Then the same schedule (no news), a later time, and one of a type
	// that is no clean word, whose time overflows a time.Time's µs.
	answers <- scheduleAnswer(st{"poweroff", at})
	answers <- scheduleAnswer(st{"poweroff", at + 60e6})
	answers <- scheduleAnswer(st{"Power Off!", math.MaxUint64 - 1})
	nt = recv(t, n.C())
	assert.Equal(t, termsig.Maintenance, nt.Kind, "the first notice after the bad answers: %v", nt)
	assert.Equal(t, "scheduled/poweroff", nt.Event)
	assert.True(t, nt.Deadline.Equal(time.UnixMicro(int64(at+60e6))), "the later time")
	cl := recv(t, n.C())
	assert.Equal(t, termsig.Cleared, cl.Kind)
	assert.Equal(t, "scheduled/poweroff", cl.Event)
	nt = recv(t, n.C())
	assert.Equal(t, termsig.Maintenance, nt.Kind)
	assert.Equal(t, logind.EventScheduled, nt.Event)
	assert.True(t, nt.Deadline.IsZero(), "a time past a time.Time's is unknown")
	// Then nothing scheduled (the default answer).
	cl = recv(t, n.C())
	assert.Equal(t, termsig.Cleared, cl.Kind)
	assert.Equal(t, logind.EventScheduled, cl.Event)
	assert.Empty(t, answers)
}

// A PropertiesChanged for ScheduledShutdown that another process sends in
// logind's name is ignored (and logged): the source reads logind's
// property on its own schedule only.
func TestForgedScheduledChangeIsIgnored(t *testing.T) {
	bus := startBus(t)
	fake := startLogind(t, bus, logindtest.Config{})
	n, log := watch(t, bus.Address(), logind.Config{ScheduledInterval: time.Hour})
	rogue, err := dbus.Connect(bus.Address())
	require.NoError(t, err)
	defer rogue.Close()
	// Sent to the source: the bus delivers a broadcast in logind's name
	// only from logind, as the source's match rule asks.
	forged := shutdownSignal(sourceName(t, bus.Address(), fake), "PropertiesChanged", logindtest.Interface,
		map[string]dbus.Variant{"ScheduledShutdown": dbus.MakeVariant(st{"poweroff", uint64(time.Now().Add(time.Minute).UnixMicro())})},
		[]string{})
	forged.Headers[dbus.FieldInterface] = dbus.MakeVariant("org.freedesktop.DBus.Properties")
	require.NoError(t, rogue.Send(forged, nil).Err)
	log.WaitFor(t, "logind: ignored shutdown signals that logind did not send", 1)
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	assert.Equal(t, termsig.Terminate, recv(t, n.C()).Kind, "the first notice is the shutdown's")
}

// While a shutdown is under way, its schedule (which logind keeps after it
// fired) or a schedule made meanwhile is no news; after a cancelled
// shutdown, a schedule is advice again.
func TestScheduleDuringAShutdownIsNoNews(t *testing.T) {
	bus := startBus(t)
	answers := make(chan func(p *progLogind, msg *dbus.Message))
	p := newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { p.replyLock(msg) }, getSchedule(answers))
	n, _ := watch(t, bus.Address(), logind.Config{})
	p.emit(true, "poweroff")
	assert.Equal(t, termsig.Terminate, recv(t, n.C()).Kind)
	at := uint64(time.Now().Add(time.Hour).UnixMicro())
	scheduled := scheduleAnswer(st{"reboot", at})
	answers <- scheduled // read while the shutdown is under way
	answers <- scheduled // and again: the first answer was acted on
	p.emit(false, "poweroff")
	assert.Equal(t, termsig.Cleared, recv(t, n.C()).Kind, "no advice while the shutdown was under way")
	answers <- scheduled
	nt := recv(t, n.C())
	assert.Equal(t, termsig.Maintenance, nt.Kind)
	assert.Equal(t, "scheduled/reboot", nt.Event)
}

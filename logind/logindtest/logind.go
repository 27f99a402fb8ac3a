// Package logindtest runs what the logind source talks to, for real, in a
// test: a private dbus-daemon ([Bus]) and a fake systemd-logind on it
// ([Logind]) that hands out delay locks as file descriptors, announces
// shutdowns with the signals the real one sends, and shows which locks
// are held and when each was released.
//
//	bus, fake := logindtest.Start(t, logindtest.Config{}) // both closed when t ends
//	n := termsig.New(logind.New(logind.Config{Address: bus.Address()}))
//	defer n.Stop()
//	// New returned: the source holds its delay lock, in fake.Held()
//	if err := fake.PrepareForShutdown("poweroff"); err != nil {
//		t.Fatal(err)
//	}
//	// the code under test reads a Terminate from n.C(), then releases it
//
// The fake also schedules shutdowns ([Logind.ScheduleShutdown], as
// `shutdown -h +5` asks logind to) and lists its locks. [StartReal] runs
// the real systemd-logind instead, on a private bus with a stub
// org.freedesktop.systemd1 ([Systemd]) and in a /run of its own; [Inhibit]
// and [ListInhibitors] are another program's calls, to either.
package logindtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
)

// The names logind is reached by.
const (
	BusName   = "org.freedesktop.login1"
	Path      = dbus.ObjectPath("/org/freedesktop/login1")
	Interface = "org.freedesktop.login1.Manager"
)

// ErrOperationInProgress is the D-Bus error name with which logind
// refuses a delay lock for a shutdown that has already begun.
const ErrOperationInProgress = "org.freedesktop.login1.OperationInProgress"

// DefaultInhibitDelayMax is logind's default InhibitDelayMaxSec.
const DefaultInhibitDelayMax = 5 * time.Second

// Config configures a fake [Logind]. The zero Config behaves as a current
// systemd-logind with the default settings.
type Config struct {
	// InhibitDelayMax is the InhibitDelayMaxUSec property; 0 means
	// DefaultInhibitDelayMax.
	InhibitDelayMax time.Duration

	// NoMetadata makes it behave as a logind older than systemd 255: it
	// sends only PrepareForShutdown, without PrepareForShutdownWithMetadata.
	NoMetadata bool

	// RefuseLocks, if set, is the D-Bus error name with which Inhibit
	// refuses every lock, such as "org.freedesktop.DBus.Error.AccessDenied"
	// (polkit said no).
	RefuseLocks string

	// HoldInhibit, if not nil, makes Inhibit wait until it is closed
	// before it answers: a logind that hangs.
	HoldInhibit <-chan struct{}

	// RefuseList and HoldList do the same for ListInhibitors.
	RefuseList string
	HoldList   <-chan struct{}

	// EmitScheduledChanges makes it send PropertiesChanged when
	// ScheduledShutdown changes, as systemd's main branch does; systemd
	// 252 does not (its EmitsChangedSignal is false), and neither does
	// the fake by default.
	EmitScheduledChanges bool
}

// An Inhibitor is one lock handed out by the fake.
type Inhibitor struct {
	What, Who, Why, Mode string
	Sender               string    // unique bus name of the caller
	UID, PID             uint32    // the caller's, as the bus daemon says
	Taken                time.Time // when it was handed out
	// Released is when the lock ended: the fake read EOF from it (every
	// copy of the descriptor it handed out is closed), or the fake was
	// closed, which drops every lock as logind's exit does. Zero while
	// it is held.
	Released time.Time
}

// A Logind is a fake org.freedesktop.login1 on a bus: its Manager object
// has the methods Inhibit, ListInhibitors, ScheduleShutdown and
// CancelScheduledShutdown and the properties InhibitDelayMaxUSec,
// PreparingForShutdown and ScheduledShutdown, and it emits
// PrepareForShutdown (and PrepareForShutdownWithMetadata) when told to,
// or when a scheduled shutdown is due. Its methods are safe for
// concurrent use.
type Logind struct {
	conn *dbus.Conn
	cfg  Config

	// noReply remembers the calls to Inhibit whose caller wants no reply;
	// see intercept.
	noReply sync.Map // callKey → struct{}

	mu       sync.Mutex
	locks    []*Inhibitor
	shutting bool          // a shutdown is announced and not cancelled
	sched    scheduled     // the scheduled shutdown; zero when none
	timer    *time.Timer   // fires sched; nil when none
	changed  chan struct{} // closed and replaced whenever locks change
	pipes    []*os.File    // read ends of the locks still held
	readers  []string      // senders of property reads, in order
	wg       sync.WaitGroup
	closed   bool
}

type callKey struct {
	sender string
	serial uint32
}

// New connects to the bus at address, takes the name org.freedesktop.login1
// and serves the Manager object. Close it when done.
func New(address string, c Config) (*Logind, error) {
	if c.InhibitDelayMax <= 0 {
		c.InhibitDelayMax = DefaultInhibitDelayMax
	}
	l := &Logind{cfg: c, changed: make(chan struct{})}
	conn, err := dbus.Connect(address, dbus.WithIncomingInterceptor(l.intercept))
	if err != nil {
		return nil, fmt.Errorf("logindtest: connect: %w", err)
	}
	l.conn = conn
	if err := l.serve(); err != nil {
		conn.Close()
		return nil, err
	}
	return l, nil
}

func (l *Logind) serve() error {
	if err := l.conn.Export(manager{l}, Path, Interface); err != nil {
		return err
	}
	if err := l.conn.Export(properties{l}, Path, propsInterface); err != nil {
		return err
	}
	reply, err := l.conn.RequestName(BusName, dbus.NameFlagDoNotQueue)
	if err != nil {
		return fmt.Errorf("logindtest: request name: %w", err)
	}
	if reply != dbus.RequestNameReplyPrimaryOwner {
		return fmt.Errorf("logindtest: %s is taken on this bus", BusName)
	}
	return nil
}

// Conn returns the fake's connection to the bus, for a test that sends
// what logind would not (malformed signals) from logind's own name.
func (l *Logind) Conn() *dbus.Conn { return l.conn }

// UniqueName returns the fake's unique name on the bus, the sender of its
// signals.
func (l *Logind) UniqueName() string { return l.conn.Names()[0] }

const propsInterface = "org.freedesktop.DBus.Properties"

// intercept runs on godbus's reader before a call is dispatched. godbus
// writes an exported method's reply only after the method has returned,
// and two replies must be written at a moment of the fake's choosing:
// Inhibit's, which carries a file descriptor that the fake closes once the
// reply is written, and the properties', which must be written before a
// signal that changes them (as logind, single-threaded, does), so that a
// client that reads PreparingForShutdown finds it consistent with the
// signals it received before the answer. So those calls are marked as
// wanting no reply, which godbus then does not send, and the methods write
// their replies themselves (see reply). Whether the caller wanted one is
// remembered.
func (l *Logind) intercept(msg *dbus.Message) {
	if msg.Type != dbus.TypeMethodCall {
		return
	}
	iface, _ := msg.Headers[dbus.FieldInterface].Value().(string)
	member, _ := msg.Headers[dbus.FieldMember].Value().(string)
	switch {
	case iface == Interface && member == "Inhibit":
	case iface == propsInterface && (member == "Get" || member == "GetAll"):
	default:
		return
	}
	if msg.Flags&dbus.FlagNoReplyExpected != 0 {
		sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
		l.noReply.Store(callKey{sender, msg.Serial()}, struct{}{})
	}
	msg.Flags |= dbus.FlagNoReplyExpected
}

// reply writes the reply to a call that intercept marked, and returns
// once it is written. Errors are still returned by the methods, which
// godbus sends whatever the flag.
func (l *Logind) reply(msg dbus.Message, body ...any) error {
	sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
	if _, noReply := l.noReply.LoadAndDelete(callKey{sender, msg.Serial()}); noReply {
		return nil
	}
	r := &dbus.Message{
		Type: dbus.TypeMethodReply,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldDestination: dbus.MakeVariant(sender),
			dbus.FieldReplySerial: dbus.MakeVariant(msg.Serial()),
			dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(body...)),
		},
		Body: body,
	}
	return l.conn.Send(r, nil).Err
}

// forget drops what intercept remembered of a call that ends in an error.
func (l *Logind) forget(msg dbus.Message) {
	sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
	l.noReply.Delete(callKey{sender, msg.Serial()})
}

// properties is the Properties interface of the Manager object.
type properties struct{ l *Logind }

// props returns the Manager's properties; l.mu is held.
func (l *Logind) propsLocked() map[string]dbus.Variant {
	return map[string]dbus.Variant{
		"InhibitDelayMaxUSec":  dbus.MakeVariant(uint64(l.cfg.InhibitDelayMax / time.Microsecond)),
		"PreparingForShutdown": dbus.MakeVariant(l.shutting),
		"ScheduledShutdown":    l.sched.variant(),
	}
}

// Get answers a property, under the lock that emitting signals holds.
func (p properties) Get(msg dbus.Message, iface, name string) (dbus.Variant, *dbus.Error) {
	l := p.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.read(msg)
	v, ok := l.propsLocked()[name]
	if iface != Interface || !ok {
		l.forget(msg)
		return dbus.Variant{}, dbus.NewError("org.freedesktop.DBus.Error.UnknownProperty", []any{"Unknown property " + name})
	}
	_ = l.reply(msg, v)
	return dbus.Variant{}, nil
}

// GetAll answers every property, as Get does.
func (p properties) GetAll(msg dbus.Message, iface string) (map[string]dbus.Variant, *dbus.Error) {
	l := p.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.read(msg)
	props := map[string]dbus.Variant{}
	if iface == Interface {
		props = l.propsLocked()
	}
	_ = l.reply(msg, props)
	return nil, nil
}

// read records the sender of a property read; l.mu is held.
func (l *Logind) read(msg dbus.Message) {
	sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
	if len(l.readers) == 0 || l.readers[len(l.readers)-1] != sender {
		l.readers = append(l.readers, sender)
	}
}

// Readers returns the unique names of the connections that read the
// Manager's properties, in the order of their first read in a row: a
// client's listening connection, such as the logind source's, which a
// test sends messages to.
func (l *Logind) Readers() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.readers...)
}

// Set refuses: logind's properties are read-only.
func (properties) Set(_, name string, _ dbus.Variant) *dbus.Error {
	return dbus.NewError("org.freedesktop.DBus.Error.PropertyReadOnly", []any{"Property " + name + " is read-only"})
}

// manager is the exported Manager object.
type manager struct{ l *Logind }

// Inhibit hands out a lock: the write end of a pipe whose read end the
// fake keeps; EOF on it means every copy was closed.
func (m manager) Inhibit(msg dbus.Message, what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	l := m.l
	sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
	if l.cfg.HoldInhibit != nil {
		<-l.cfg.HoldInhibit
	}
	if l.cfg.RefuseLocks != "" {
		l.forget(msg)
		return 0, dbus.NewError(l.cfg.RefuseLocks, []any{"refused by the test"})
	}
	if err := l.check(what, mode); err != nil {
		l.forget(msg)
		return 0, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		l.forget(msg)
		return 0, dbus.MakeFailedError(err)
	}
	defer w.Close() // the caller has its own copy once the reply is written
	inh := &Inhibitor{What: what, Who: who, Why: why, Mode: mode, Sender: sender, Taken: time.Now()}
	bus := l.conn.BusObject()
	_ = bus.Call("org.freedesktop.DBus.GetConnectionUnixUser", 0, sender).Store(&inh.UID)
	_ = bus.Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, sender).Store(&inh.PID)
	if err := l.reply(msg, dbus.UnixFD(w.Fd())); err != nil || !l.hold(inh, r) {
		r.Close()
	}
	return 0, nil // not sent: the reply went above
}

// ListInhibitors lists the locks held: what, who, why, mode, uid, pid.
func (m manager) ListInhibitors() ([]struct {
	What, Who, Why, Mode string
	UID, PID             uint32
}, *dbus.Error) {
	l := m.l
	if l.cfg.HoldList != nil {
		<-l.cfg.HoldList
	}
	if l.cfg.RefuseList != "" {
		return nil, dbus.NewError(l.cfg.RefuseList, []any{"refused by the test"})
	}
	var out []struct {
		What, Who, Why, Mode string
		UID, PID             uint32
	}
	for _, i := range l.Held() {
		out = append(out, struct {
			What, Who, Why, Mode string
			UID, PID             uint32
		}{i.What, i.Who, i.Why, i.Mode, i.UID, i.PID})
	}
	return out, nil
}

// ScheduleShutdown is logind's method: see [Logind.ScheduleShutdown].
func (m manager) ScheduleShutdown(typ string, usec uint64) *dbus.Error {
	if err := m.l.schedule(typ, usec); err != nil {
		return dbus.NewError("org.freedesktop.DBus.Error.InvalidArgs", []any{err.Error()})
	}
	return nil
}

// CancelScheduledShutdown is logind's method: see
// [Logind.CancelScheduledShutdown].
func (m manager) CancelScheduledShutdown() (bool, *dbus.Error) {
	cancelled, err := m.l.CancelScheduledShutdown()
	if err != nil {
		return false, dbus.MakeFailedError(err)
	}
	return cancelled, nil
}

// check refuses what logind refuses.
func (l *Logind) check(what, mode string) *dbus.Error {
	switch mode {
	case "block", "delay", "block-weak":
	default:
		return dbus.NewError("org.freedesktop.DBus.Error.InvalidArgs", []any{"Invalid mode specification " + mode})
	}
	whats := strings.Split(what, ":")
	for _, w := range whats {
		switch w {
		case "shutdown", "sleep", "idle", "handle-power-key", "handle-suspend-key",
			"handle-hibernate-key", "handle-lid-switch", "handle-reboot-key":
		default:
			return dbus.NewError("org.freedesktop.DBus.Error.InvalidArgs", []any{"Invalid what specification " + what})
		}
	}
	if mode == "delay" && slices.ContainsFunc(whats, func(w string) bool { return w != "shutdown" && w != "sleep" }) {
		return dbus.NewError("org.freedesktop.DBus.Error.InvalidArgs", []any{"Delay inhibitors only supported for shutdown and sleep"})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shutting && mode == "delay" && slices.Contains(whats, "shutdown") {
		return dbus.NewError(ErrOperationInProgress, []any{"The operation inhibition has been requested for is already running"})
	}
	return nil
}

// hold records inh and watches r for EOF. It returns false if the fake
// is closed.
func (l *Logind) hold(inh *Inhibitor, r *os.File) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.locks = append(l.locks, inh)
	l.pipes = append(l.pipes, r)
	l.changedLocked()
	l.wg.Add(1)
	go l.watch(inh, r)
	return true
}

// watch waits until every copy of the lock is closed, or the fake is.
func (l *Logind) watch(inh *Inhibitor, r *os.File) {
	defer l.wg.Done()
	var buf [64]byte
	var err error
	for err == nil {
		_, err = r.Read(buf[:])
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(err, os.ErrClosed) {
		return // the fake is closing
	}
	inh.Released = time.Now()
	l.pipes = slices.DeleteFunc(l.pipes, func(f *os.File) bool { return f == r })
	r.Close()
	l.changedLocked()
}

func (l *Logind) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Inhibitors returns every lock handed out so far, held or released, in
// the order they were taken.
func (l *Logind) Inhibitors() []Inhibitor {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Inhibitor, len(l.locks))
	for i, inh := range l.locks {
		out[i] = *inh
	}
	return out
}

// Held returns the locks still held.
func (l *Logind) Held() []Inhibitor {
	return slices.DeleteFunc(l.Inhibitors(), func(i Inhibitor) bool { return !i.Released.IsZero() })
}

// Wait waits until cond, called with Inhibitors whenever they change,
// returns true, or ctx is done.
func (l *Logind) Wait(ctx context.Context, cond func([]Inhibitor) bool) error {
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if cond(l.Inhibitors()) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("logindtest: waiting for inhibitors (now %d, %d held): %w", len(l.Inhibitors()), len(l.Held()), ctx.Err())
		}
	}
}

// PrepareForShutdown announces a shutdown of the given type ("poweroff",
// "reboot", "halt", "kexec", "soft-reboot") as logind does: it sets
// PreparingForShutdown, refuses new delay locks for shutdown from now on,
// and emits PrepareForShutdownWithMetadata(true, {"type": typ}) (unless
// Config.NoMetadata) and then PrepareForShutdown(true). Unless a
// shutdown is scheduled, ScheduledShutdown becomes (typ, 0), as in
// systemd 252, and stays so after the shutdown is cancelled.
func (l *Logind) PrepareForShutdown(typ string) error { return l.announce(true, typ) }

// CancelShutdown announces that the shutdown was cancelled: it clears
// PreparingForShutdown, accepts delay locks again, and emits the signals
// with false.
func (l *Logind) CancelShutdown(typ string) error { return l.announce(false, typ) }

// announce changes PreparingForShutdown and emits the signals under l.mu,
// so that no property is read in between.
func (l *Logind) announce(active bool, typ string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.announceLocked(active, typ)
}

func (l *Logind) announceLocked(active bool, typ string) error {
	l.shutting = active
	if active && (l.sched.typ == "" || l.sched.usec == 0) {
		// As systemd 252 shows a shutdown not scheduled, until the next
		// schedule or CancelScheduledShutdown.
		l.sched = scheduled{typ: typ}
		if err := l.schedChangedLocked(); err != nil {
			return err
		}
	}
	if !l.cfg.NoMetadata {
		md := map[string]dbus.Variant{"type": dbus.MakeVariant(typ)}
		if err := l.conn.Emit(Path, Interface+".PrepareForShutdownWithMetadata", active, md); err != nil {
			return err
		}
	}
	return l.conn.Emit(Path, Interface+".PrepareForShutdown", active)
}

// Close leaves the bus and stops watching the locks: those still held
// end (Released is set), as they do when logind stops for good. (A real
// logind that restarts reloads its inhibitors from /run/systemd/inhibit
// and keeps them; a test of that starts a new fake and lets the client
// take a new lock.)
func (l *Logind) Close() error {
	l.mu.Lock()
	l.closed = true
	l.stopTimerLocked()
	for _, r := range l.pipes {
		r.Close()
	}
	l.pipes = nil
	now := time.Now()
	for _, inh := range l.locks {
		if inh.Released.IsZero() {
			inh.Released = now
		}
	}
	l.changedLocked()
	l.mu.Unlock()
	err := l.conn.Close()
	l.wg.Wait()
	return err
}

package logind_test

import (
	"os"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig/logind/logindtest"
)

type lockEnd struct {
	n   int
	eof <-chan struct{}
}

// progLogind is a programmable logind for the tests of what logind may do: every call to
// Inhibit and to Properties.Get is handed, in a goroutine of its own, to a
// function of the test, which answers it (or not) as it likes: with a lock,
// a wrong type, an error, late, never.
type progLogind struct {
	t    testing.TB
	conn *dbus.Conn

	mu       sync.Mutex
	inhibit  func(p *progLogind, n int, msg *dbus.Message) // n counts calls from 1
	get      func(p *progLogind, prop string, msg *dbus.Message)
	inhibits int
	pipes    []*os.File // read ends of the locks handed out
}

// noop is exported so that godbus dispatches the calls (and sends no
// UnknownObject error); the interceptor marks them no-reply, so godbus sends
// nothing and the test's function answers.
type noop struct{}

func (noop) Inhibit(what, who, why, mode string) *dbus.Error { return nil }
func (noop) Get(iface, prop string) *dbus.Error              { return nil }

func newProgLogind(t testing.TB, addr string, inhibit func(p *progLogind, n int, msg *dbus.Message), get func(p *progLogind, prop string, msg *dbus.Message)) *progLogind {
	if get == nil {
		get = (*progLogind).defaultGet
	}
	t.Helper()
	p := &progLogind{t: t, inhibit: inhibit, get: get}
	conn, err := dbus.Connect(addr, dbus.WithIncomingInterceptor(p.intercept))
	if err != nil {
		t.Fatal(err)
	}
	p.conn = conn
	if err := conn.Export(noop{}, logindtest.Path, logindtest.Interface); err != nil {
		t.Fatal(err)
	}
	if err := conn.Export(noop{}, logindtest.Path, "org.freedesktop.DBus.Properties"); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName(logindtest.BusName, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("request name: %v %v", reply, err)
	}
	t.Cleanup(p.Close)
	return p
}

func (p *progLogind) Close() {
	p.conn.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.pipes {
		r.Close()
	}
	p.pipes = nil
}

func (p *progLogind) intercept(msg *dbus.Message) {
	if msg.Type != dbus.TypeMethodCall {
		return
	}
	member, _ := msg.Headers[dbus.FieldMember].Value().(string)
	switch member {
	case "Inhibit":
		msg.Flags |= dbus.FlagNoReplyExpected
		p.mu.Lock()
		p.inhibits++
		n := p.inhibits
		p.mu.Unlock()
		go p.inhibit(p, n, msg)
	case "Get":
		msg.Flags |= dbus.FlagNoReplyExpected
		prop, _ := msg.Body[1].(string)
		go p.get(p, prop, msg)
	}
}

// reply answers call with body.
func (p *progLogind) reply(call *dbus.Message, body ...any) error {
	sender, _ := call.Headers[dbus.FieldSender].Value().(string)
	m := &dbus.Message{
		Type: dbus.TypeMethodReply,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldDestination: dbus.MakeVariant(sender),
			dbus.FieldReplySerial: dbus.MakeVariant(call.Serial()),
		},
		Body: body,
	}
	if len(body) > 0 {
		m.Headers[dbus.FieldSignature] = dbus.MakeVariant(dbus.SignatureOf(body...))
	}
	return p.conn.Send(m, nil).Err
}

// replyErr answers call with the D-Bus error name.
func (p *progLogind) replyErr(call *dbus.Message, name string) error {
	sender, _ := call.Headers[dbus.FieldSender].Value().(string)
	m := &dbus.Message{
		Type: dbus.TypeError,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldDestination: dbus.MakeVariant(sender),
			dbus.FieldReplySerial: dbus.MakeVariant(call.Serial()),
			dbus.FieldErrorName:   dbus.MakeVariant(name),
			dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf("x")),
		},
		Body: []any{"x"},
	}
	return p.conn.Send(m, nil).Err
}

// replyLock answers an Inhibit call with the write end of a new pipe and
// returns the read end: EOF on it means every copy of the lock is closed.
func (p *progLogind) replyLock(call *dbus.Message) *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		p.t.Error(err)
		return nil
	}
	defer w.Close()
	if err := p.reply(call, dbus.UnixFD(w.Fd())); err != nil {
		p.t.Error(err)
	}
	p.mu.Lock()
	p.pipes = append(p.pipes, r)
	p.mu.Unlock()
	return r
}

// defaultGet answers Get as a logind with a 5 s delay, not shutting down.
func (p *progLogind) defaultGet(prop string, msg *dbus.Message) {
	switch prop {
	case "InhibitDelayMaxUSec":
		p.reply(msg, dbus.MakeVariant(uint64(5_000_000)))
	case "PreparingForShutdown":
		p.reply(msg, dbus.MakeVariant(false))
	default:
		p.replyErr(msg, "org.freedesktop.DBus.Error.UnknownProperty")
	}
}

// emit sends logind's pair of shutdown signals.
func (p *progLogind) emit(active bool, typ string) {
	p.t.Helper()
	md := map[string]dbus.Variant{"type": dbus.MakeVariant(typ)}
	if err := p.conn.Emit(logindtest.Path, logindtest.Interface+".PrepareForShutdownWithMetadata", active, md); err != nil {
		p.t.Fatal(err)
	}
	if err := p.conn.Emit(logindtest.Path, logindtest.Interface+".PrepareForShutdown", active); err != nil {
		p.t.Fatal(err)
	}
}

// eof returns a channel closed when r reads EOF (every copy of the lock
// closed).
func eof(r *os.File) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		var b [8]byte
		for {
			if _, err := r.Read(b[:]); err != nil {
				close(c)
				return
			}
		}
	}()
	return c
}

// openFds counts this process's open descriptors.
func openFds(t testing.TB) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// sourceName returns the unique name of the logind source's listening
// connection: the last that read fake's properties.
func sourceName(t *testing.T, _ string, fake *logindtest.Logind) string {
	t.Helper()
	r := fake.Readers()
	if len(r) == 0 {
		t.Fatal("no connection read the fake's properties")
	}
	return r[len(r)-1]
}

// shutdownSignal is a signal that looks like logind's Manager's member,
// sent to dest ("" for everyone) by whoever sends it.
func shutdownSignal(dest, member string, body ...any) *dbus.Message {
	msg := &dbus.Message{
		Type: dbus.TypeSignal,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldPath:      dbus.MakeVariant(dbus.ObjectPath(logindtest.Path)),
			dbus.FieldInterface: dbus.MakeVariant(logindtest.Interface),
			dbus.FieldMember:    dbus.MakeVariant(member),
			dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf(body...)),
		},
		Body: body,
	}
	if dest != "" {
		msg.Headers[dbus.FieldDestination] = dbus.MakeVariant(dest)
	}
	return msg
}

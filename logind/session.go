package logind

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
)

// D-Bus error names the watcher tells apart.
const (
	errServiceUnknown    = "org.freedesktop.DBus.Error.ServiceUnknown"
	errNameHasNoOwner    = "org.freedesktop.DBus.Error.NameHasNoOwner"
	errOperationUnderway = "org.freedesktop.login1.OperationInProgress"
)

var (
	// errBusLost ends a session whose connection ended.
	errBusLost = errors.New("logind: connection to the system bus lost")
	// errLogindGone is reported while logind is not on the bus.
	errLogindGone = errors.New("logind: systemd-logind left the system bus")
)

// A watcher is one Watch: a session per connection to the bus, with what
// carries over from one to the next.
type watcher struct {
	src  *Source
	cfg  Config
	eps  []endpoint
	run  *termsig.Run
	send *sender // hands the notices over, in order, across sessions

	connected  bool     // a session connected once: later failures are transient
	hadLogind  bool     // logind answered once: its absence later is transient
	healthy    bool     // the last session got as far as listening
	warnedLock string   // the refusal of a lock last logged
	warnedList string   // the failure of ListInhibitors last logged
	sched      schedule // the scheduled shutdown last reported; zero: none

	// Of the current session:
	conn       *dbus.Conn
	filter     *filter
	delay      time.Duration      // InhibitDelayMaxUSec; -1: no bound
	lockErr    error              // why no delay lock is held; nil: one is, or none is wanted
	needLock   bool               // take a lock once the notices are handed over
	retryLock  bool               // the last try failed: try again after a backoff
	renew      bool               // a new logind owns the name: meet it afresh
	owner      string             // logind's unique name as the watcher knows it
	warned     bool               // a forged signal was logged
	polled     chan *dbus.Call    // capacity 1: the answer of a read of ScheduledShutdown
	poll       *dbus.Call         // that read, under way; nil when none
	pollCancel context.CancelFunc // ends it
	pollNow    bool               // read ScheduledShutdown once none is under way
}

// session connects, subscribes, takes the lock and hears signals until
// the connection ends (an error) or ctx is done (nil).
func (w *watcher) session(ctx context.Context) error {
	w.healthy, w.warned, w.lockErr, w.needLock, w.retryLock, w.renew, w.owner = false, false, nil, false, false, false, ""
	w.filter = newFilter()
	w.polled, w.poll, w.pollCancel, w.pollNow = make(chan *dbus.Call, 1), nil, nil, false
	conn, err := w.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	w.conn = conn
	w.connected = true
	if err := w.setUp(ctx); err != nil {
		return err
	}
	w.healthy = true
	// What the first look found is on C before Ready.
	if err := w.flush(ctx); err != nil {
		return err
	}
	w.reportLock()
	w.run.Ready()
	return w.listen(ctx)
}

// connect dials the bus for listening, within RequestTimeout. The connection
// does not take file descriptors: the bus refuses to pass it any, so that
// a process that sends this one messages carrying descriptors cannot fill
// its descriptor table. The lock comes on a connection of its own (see
// inhibit).
func (w *watcher) connect(ctx context.Context) (*dbus.Conn, error) {
	tctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	var nc net.Conn
	var err error
	missing := true // every socket of the address is missing
	for _, ep := range w.eps {
		var d net.Dialer
		if nc, err = d.DialContext(tctx, ep.network, ep.addr); err == nil {
			break
		}
		missing = missing && errors.Is(err, syscall.ENOENT)
	}
	if err != nil {
		if !w.connected && missing {
			return nil, fmt.Errorf("logind: no system bus: %w: %w", err, termsig.ErrUnavailable)
		}
		return nil, fmt.Errorf("logind: system bus: %w", err)
	}
	// WithContext: the connection closes when Watch's ctx ends.
	conn, err := dbus.NewConn(bufferedConn{bufio.NewReader(nc), nc}, dbus.WithContext(ctx), dbus.WithSignalHandler(w.filter))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("logind: system bus: %w", err)
	}
	if err := handshake(tctx, conn); err != nil {
		return nil, fmt.Errorf("logind: system bus: handshake: %w", err)
	}
	return conn, nil
}

// bufferedConn reads through a buffer: godbus decodes a message with many
// small reads, each a system call on a bare connection.
type bufferedConn struct {
	r *bufio.Reader
	net.Conn
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// handshake authenticates and says hello on conn, or closes it when ctx
// ends first.
func handshake(ctx context.Context, conn *dbus.Conn) error {
	closed := context.AfterFunc(ctx, func() { conn.Close() })
	err := conn.Auth(nil)
	if err == nil {
		err = conn.Hello()
	}
	if !closed() {
		err = fmt.Errorf("no answer: %w", context.Cause(ctx))
	}
	if err != nil {
		conn.Close()
	}
	return err
}

// setUp subscribes to logind's signals, learns logind's unique name (so
// that from then on only its signals are queued), takes the delay lock,
// reads logind's settings, and catches up with a shutdown that began or
// was cancelled while the source was not connected.
func (w *watcher) setUp(ctx context.Context) error {
	if err := w.subscribe(ctx); err != nil {
		return err
	}
	return w.meet(ctx)
}

// meet learns who logind is and where it stands: its unique name, a lock
// from it, its delay, whether it is shutting down, the shutdown it has
// scheduled. It runs when the
// session starts and again when a new logind takes the name (it
// restarted), on the same connection.
func (w *watcher) meet(ctx context.Context) error {
	for {
		w.renew = false
		if err := w.learnOwner(ctx); err != nil {
			return err
		}
		if err := w.takeLock(ctx); err != nil {
			return err
		}
		w.delay = DefaultInhibitDelay
		if v, err := w.property(ctx, "InhibitDelayMaxUSec"); err == nil {
			if usec, ok := v.(uint64); ok {
				w.delay = delayOf(usec)
			}
		}
		v, err := w.property(ctx, "PreparingForShutdown")
		var de dbus.Error
		if err != nil && !errors.As(err, &de) {
			return fmt.Errorf("logind: PreparingForShutdown: %w", err)
		}
		// A logind that answers with an error or a wrong type is taken to
		// be not shutting down: the signals still tell.
		preparing, _ := v.(bool)
		// Signals that came before the answer are older than it: act on
		// them first, then on what the answer says that no signal told.
		w.drain(ctx)
		if w.renew {
			continue // logind changed meanwhile: meet the new one
		}
		w.catchUp(preparing)
		w.readSchedule(ctx)
		return nil
	}
}

// learnOwner finds logind's unique name, starting logind if the bus can
// (it is activatable on a systemd host), and keeps only its signals from
// then on.
func (w *watcher) learnOwner(ctx context.Context) error {
	bus := w.conn.BusObject()
	var owner string
	err := w.call(ctx, bus, "org.freedesktop.DBus.GetNameOwner", busName).Store(&owner)
	var de dbus.Error
	if errors.As(err, &de) && de.Name == errNameHasNoOwner {
		// Not running: start it if the bus knows how, then ask again.
		var started uint32
		if err := w.call(ctx, bus, "org.freedesktop.DBus.StartServiceByName", busName, uint32(0)).Store(&started); err != nil {
			return w.logindErr(err)
		}
		err = w.call(ctx, bus, "org.freedesktop.DBus.GetNameOwner", busName).Store(&owner)
	}
	if err != nil {
		return w.logindErr(err)
	}
	w.owner = owner
	w.filter.learn(owner)
	w.hadLogind = true
	return nil
}

// property reads one of the Manager's properties.
func (w *watcher) property(ctx context.Context, name string) (any, error) {
	var v dbus.Variant
	err := w.call(ctx, w.conn.Object(busName, objPath), "org.freedesktop.DBus.Properties.Get", iface, name).Store(&v)
	return v.Value(), err
}

// subscribe asks the bus for logind's signals (its shutdown signals, and
// its PropertiesChanged, which a newer logind sends for
// ScheduledShutdown) and for changes of logind's owner.
func (w *watcher) subscribe(ctx context.Context) error {
	tctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	err := w.conn.AddMatchSignalContext(tctx,
		dbus.WithMatchSender(busName), dbus.WithMatchObjectPath(objPath), dbus.WithMatchInterface(iface))
	if err == nil {
		err = w.conn.AddMatchSignalContext(tctx,
			dbus.WithMatchSender(busName), dbus.WithMatchObjectPath(objPath),
			dbus.WithMatchInterface(propsIface), dbus.WithMatchMember("PropertiesChanged"), dbus.WithMatchArg(0, iface))
	}
	if err == nil {
		err = w.conn.AddMatchSignalContext(tctx,
			dbus.WithMatchSender(busDaemon), dbus.WithMatchObjectPath(busPath),
			dbus.WithMatchInterface(busDaemon), dbus.WithMatchMember("NameOwnerChanged"), dbus.WithMatchArg(0, busName))
	}
	if err != nil {
		return fmt.Errorf("logind: subscribe: %w", err)
	}
	return nil
}

// catchUp reconciles what the source believes with PreparingForShutdown.
func (w *watcher) catchUp(preparing bool) {
	switch under := w.src.underway(); {
	case preparing && !under:
		// Begun before the source subscribed: no signal is coming, and
		// logind refused a new lock.
		reason := "shutdown already under way when the source connected to logind (no delay lock)"
		if w.src.holding() {
			reason = "shutdown already under way when the source connected to logind, delay lock held"
		}
		// When logind began to wait is not known: it may be done
		// waiting already. The Deadline is now.
		now := time.Now()
		n := noticeOf("", now, 0, reason)
		if w.src.begin(n) {
			w.send.push(n)
		}
	case !preparing && under:
		w.cancelled()
	}
}

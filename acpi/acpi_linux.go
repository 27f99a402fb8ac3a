package acpi

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/termsig/termsig/internal/backoff"
)

// checkPaths returns an error for a place that the Config sets for a
// transport it selects, and that cannot be used (see [Config]). c is the
// Config as given.
func (c Config) checkPaths() error {
	want := c.withDefaults().Transports
	if p := c.AcpidSocket; p != "" && want&Acpid != 0 {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("acpi: Config.AcpidSocket: %w", err)
		}
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("acpi: Config.AcpidSocket: %s is not a socket", p)
		}
	}
	if p := c.InputDevices; p != "" && want&Input != 0 {
		m, err := filepath.Glob(p)
		if err != nil {
			return fmt.Errorf("acpi: Config.InputDevices %q: %w", p, err)
		}
		if len(m) == 0 {
			return fmt.Errorf("acpi: Config.InputDevices %q matches no file", p)
		}
	}
	return nil
}

// open returns the selected transports that are available now. Failures
// are logged at debug level: a missing transport is the common case. c has
// the defaults applied.
func (c Config) open() []transport {
	var ts []transport
	want := c.Transports
	log := c.Logger
	if want&Netlink != 0 {
		c, err := dialNetlink()
		if err != nil {
			log.Debug("acpi: netlink unavailable", "err", err)
		} else {
			ts = append(ts, &netlinkTransport{conn: c})
		}
	}
	if want&Acpid != 0 {
		// Only look: acpid is connected to in run, where failures are
		// retried.
		fi, err := os.Stat(c.AcpidSocket)
		switch {
		case err != nil:
			log.Debug("acpi: acpid unavailable", "err", err)
		case fi.Mode()&os.ModeSocket == 0:
			log.Debug("acpi: acpid unavailable: not a socket", "path", c.AcpidSocket)
		default:
			ts = append(ts, &acpidTransport{path: c.AcpidSocket})
		}
	}
	if want&Input != 0 {
		ts = append(ts, c.openInputs()...)
	}
	return ts
}

// pastDeadline returns a deadline that has passed: setting it unblocks a
// read at once.
func pastDeadline() time.Time { return time.Unix(1, 0) }

// onDone runs unblock once ctx is done, and returns a function that
// cancels that or, if unblock has started, waits until it has finished, so
// that no goroutine of ours outlives the caller.
func onDone(ctx context.Context, unblock func()) (release func()) {
	ran := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(ran)
		unblock()
	})
	return func() {
		if !stop() {
			<-ran
		}
	}
}

// retry runs session again and again until ctx is done: each failure is
// recorded as the health of part i (the Notifier logs each change), then
// waited out with backoff. A session reports through ok that it has
// connected, and returns whether it made progress, which resets the
// backoff. The first connection or failure is the transport's first look.
func retry(ctx context.Context, w *watcher, i int, session func(ok func()) (progress bool, err error)) {
	// No jitter: one process per host reconnects to its own acpid or
	// kernel, so there is no herd to spread.
	b := backoff.Backoff{Base: w.cfg.backoff, Max: w.cfg.maxBackoff}
	ok := func() {
		w.health.Set(i, nil)
		w.health.Looked(i)
	}
	for ctx.Err() == nil {
		progress, err := session(ok)
		if ctx.Err() != nil {
			return
		}
		if progress {
			b.Reset()
		}
		w.health.Set(i, err)
		w.health.Looked(i) // after the first attempt; again does nothing
		if !backoff.Sleep(ctx, b.Next()) {
			return
		}
	}
}

// The netlink transport.

type netlinkConn struct {
	nl     *netlink.Conn
	family uint16
}

// dialNetlink subscribes to the acpi_event family's multicast group. The
// family is only visible in the initial network namespace, so that this
// fails in a container with a network namespace of its own, where the
// host's power button is not ours to watch anyway.
func dialNetlink() (*netlinkConn, error) {
	nl, err := netlink.Dial(unix.NETLINK_GENERIC, nil)
	if err != nil {
		return nil, fmt.Errorf("acpi: netlink: %w", err)
	}
	fam, err := genetlink.NewConn(nl).GetFamily(genlFamily)
	if err != nil {
		nl.Close()
		return nil, fmt.Errorf("acpi: netlink family %s: %w", genlFamily, err)
	}
	for _, g := range fam.Groups {
		if g.Name != genlGroup {
			continue
		}
		if err := nl.JoinGroup(g.ID); err != nil {
			nl.Close()
			return nil, fmt.Errorf("acpi: netlink group %s/%s: %w", genlFamily, genlGroup, err)
		}
		return &netlinkConn{nl: nl, family: fam.ID}, nil
	}
	nl.Close()
	return nil, fmt.Errorf("acpi: netlink family %s has no group %s", genlFamily, genlGroup)
}

type netlinkTransport struct {
	conn *netlinkConn // nil after a failure, until re-subscribed
}

func (t *netlinkTransport) kind() Transport { return Netlink }

func (t *netlinkTransport) close() {
	if t.conn != nil {
		t.conn.nl.Close()
		t.conn = nil
	}
}

// run receives on the subscription that open made, and subscribes again
// after a failure.
func (t *netlinkTransport) run(ctx context.Context, w *watcher, i int) error {
	defer t.close()
	w.log.Debug("acpi: netlink subscribed", "port", t.conn.nl.PID())
	retry(ctx, w, i, func(ok func()) (bool, error) {
		if t.conn == nil {
			c, err := dialNetlink()
			if err != nil {
				return false, err
			}
			t.conn = c
			w.log.Debug("acpi: netlink subscribed", "port", c.nl.PID())
		}
		ok()
		progress, err := t.receive(ctx, w)
		t.close()
		return progress, err
	})
	return nil
}

func (t *netlinkTransport) receive(ctx context.Context, w *watcher) (progress bool, err error) {
	c := t.conn
	defer onDone(ctx, func() { c.nl.SetReadDeadline(pastDeadline()) })()
	for {
		msgs, err := c.nl.Receive()
		if err != nil {
			if ctx.Err() != nil {
				return progress, ctx.Err()
			}
			if errors.Is(err, unix.ENOBUFS) {
				// The socket stays usable; the events that did not fit are
				// lost, and the other transports may have them.
				w.log.Warn("acpi: netlink receive buffer overrun, events lost")
				continue
			}
			return progress, fmt.Errorf("acpi: netlink receive: %w", err)
		}
		progress = true
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(c.family) {
				continue
			}
			ev, err := parseGenlMessage(m.Data)
			if err != nil {
				w.ignore(Netlink, err.Error(), hex.EncodeToString(m.Data))
				continue
			}
			if !ev.isPowerPress() {
				w.ignore(Netlink, "not a power-button press", ev.String())
				continue
			}
			p := press{t: Netlink, device: clip(ev.bus), raw: ev.String(), at: time.Now()}
			if !w.press(ctx, p) {
				return progress, ctx.Err()
			}
		}
	}
}

// The acpid transport.

type acpidTransport struct {
	path string
}

func (t *acpidTransport) kind() Transport { return Acpid }
func (t *acpidTransport) close()          {}

// acpidMaxLine bounds a line from acpid; longer ones are skipped. acpid's
// lines are well under 100 bytes.
const acpidMaxLine = 512

// acpidDialTimeout bounds a connection attempt to acpid. Connecting to a
// UNIX socket succeeds or fails at once unless acpid is stuck and stops
// accepting; the first attempt is part of the source's first look, which
// termsig.New waits for, so it must stay short.
const acpidDialTimeout = time.Second

func (t *acpidTransport) run(ctx context.Context, w *watcher, i int) error {
	d := net.Dialer{Timeout: acpidDialTimeout}
	retry(ctx, w, i, func(ok func()) (bool, error) {
		conn, err := d.DialContext(ctx, "unix", t.path)
		if err != nil {
			return false, fmt.Errorf("acpi: acpid: %w", err)
		}
		defer conn.Close()
		w.log.Debug("acpi: connected to acpid", "path", t.path)
		ok()
		progress, err := t.read(ctx, w, conn)
		if err == io.EOF {
			err = errors.New("acpi: acpid closed the connection")
		} else if err != nil {
			err = fmt.Errorf("acpi: acpid: %w", err)
		}
		return progress, err
	})
	return nil
}

func (t *acpidTransport) read(ctx context.Context, w *watcher, conn net.Conn) (progress bool, err error) {
	defer onDone(ctx, func() { conn.SetReadDeadline(pastDeadline()) })()
	r := bufio.NewReaderSize(conn, acpidMaxLine)
	skipping := false
	for {
		b, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !skipping {
				w.ignore(Acpid, "line too long", string(b))
			}
			skipping = true
			continue
		}
		if err != nil {
			// A partial line at the end is not an event.
			if ctx.Err() != nil {
				return progress, ctx.Err()
			}
			return progress, err
		}
		progress = true
		if skipping {
			skipping = false
			continue
		}
		line := strings.TrimRight(string(b), "\r\n")
		ev, err := parseAcpidLine(line)
		if err != nil {
			w.ignore(Acpid, err.Error(), line)
			continue
		}
		if !ev.isPowerPress() {
			w.ignore(Acpid, "not a power-button press", line)
			continue
		}
		if !w.press(ctx, press{t: Acpid, device: clip(ev.bus), raw: line, at: time.Now()}) {
			return progress, ctx.Err()
		}
	}
}

// The input transport: one per device.

// openInputs opens the input devices that match the glob and have
// KEY_POWER. A device that cannot be read (permissions: event devices are
// usually root:input 0660) is skipped.
func (c Config) openInputs() []transport {
	log := c.Logger
	paths, err := filepath.Glob(c.InputDevices)
	if err != nil {
		log.Debug("acpi: input devices unavailable", "glob", c.InputDevices, "err", err)
		return nil
	}
	var ts []transport
	for _, p := range paths {
		name, err := c.powerKeyDevice(p)
		if err != nil {
			log.Debug("acpi: input device skipped", "path", p, "err", err)
			continue
		}
		// O_NONBLOCK: a FIFO standing in for a device must not block the
		// open, and os.File then polls the descriptor, so that a read
		// deadline can unblock a read.
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			log.Debug("acpi: input device skipped", "path", p, "err", err)
			continue
		}
		ts = append(ts, &inputTransport{path: p, name: name, f: f})
	}
	if len(ts) == 0 {
		log.Debug("acpi: input unavailable: no readable device with KEY_POWER", "glob", c.InputDevices)
	}
	return ts
}

// powerKeyDevice returns the name of the input device at path if its key
// capabilities in sysfs (below Root) include KEY_POWER, and an error
// otherwise.
func (c Config) powerKeyDevice(path string) (name string, err error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	dev := filepath.Join(c.under(sysfsDir), "class", "input", filepath.Base(real), "device")
	caps, err := os.ReadFile(filepath.Join(dev, "capabilities", "key"))
	if err != nil {
		return "", err
	}
	ok, err := hasKey(string(caps), keyPower, strconv.IntSize)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errors.New("no KEY_POWER")
	}
	b, _ := os.ReadFile(filepath.Join(dev, "name"))
	return clip(strings.TrimSpace(string(b))), nil
}

type inputTransport struct {
	path string
	name string
	f    *os.File
}

func (t *inputTransport) kind() Transport { return Input }
func (t *inputTransport) close()          { t.f.Close() }

// run reads input_event records until ctx is done. An input device does not
// come back once it has gone, so an error ends the transport for good.
func (t *inputTransport) run(ctx context.Context, w *watcher, i int) error {
	defer t.close()
	w.health.Looked(i) // open opened the device
	w.log.Debug("acpi: reading input device", "path", t.path, "name", t.name)
	// A regular file (a recording) cannot take a deadline, but reading it
	// never blocks either.
	defer onDone(ctx, func() { t.f.SetReadDeadline(pastDeadline()) })()
	buf := make([]byte, 64*inputEventSize)
	var stream inputStream
	for {
		n, err := t.f.Read(buf)
		for _, rec := range stream.feed(buf[:n]) {
			p := press{t: Input, device: t.path, raw: hex.EncodeToString(rec), at: time.Now()}
			if !w.press(ctx, p) {
				return nil
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if err == io.EOF {
				err = errors.New("end of file")
			}
			w.log.Warn("acpi: input device gone", "path", t.path, "err", err)
			return fmt.Errorf("acpi: input device %s: %w", t.path, err)
		}
	}
}

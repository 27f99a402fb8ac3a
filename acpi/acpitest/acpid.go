package acpitest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Lines that acpid writes to its clients. One press of the power button is
// two lines: PowerButtonInputLine, which acpid makes from the input device,
// and PowerButtonLine, which it relays from the kernel's netlink event.
const (
	PowerButtonInputLine = "button/power PBTN 00000080 00000000"
	PowerButtonLine      = "button/power LNXPWRBN:00 00000080 00000001"
	SleepButtonLine      = "button/sleep SBTN 00000080 00000000"
	LidCloseLine         = "button/lid LID close"
	ACAdapterLine        = "ac_adapter ACPI0003:00 00000080 00000000"
	BatteryLine          = "battery PNP0C0A:00 00000080 00000001"
	ThermalLine          = "thermal_zone LNXTHERM:00 00000081 00000000"
)

// writeTimeout bounds a write to a client that does not read, so that a
// stuck client cannot block Send.
const writeTimeout = 5 * time.Second

// An Acpid is a fake acpid: a server on a real UNIX stream socket that
// speaks acpid's client protocol, one line per event. Point
// acpi.Config.AcpidSocket at [Acpid.Path].
//
// Its methods are safe for concurrent use. Close it when done: it leaves no
// goroutine, socket or file behind.
type Acpid struct {
	dir, path string

	mu       sync.Mutex
	ln       net.Listener // nil while stopped
	conns    map[net.Conn]struct{}
	changed  chan struct{} // closed and replaced when conns changes
	closed   bool
	accepted int
	wg       sync.WaitGroup
}

// NewAcpid starts a fake acpid on a socket in a new temporary directory.
// The directory's path is short, since a UNIX socket's path is limited to
// about 100 bytes.
func NewAcpid() (*Acpid, error) {
	dir, err := os.MkdirTemp("", "acpitest")
	if err != nil {
		return nil, fmt.Errorf("acpitest: %w", err)
	}
	a := &Acpid{
		dir:     dir,
		path:    filepath.Join(dir, "acpid.socket"),
		conns:   make(map[net.Conn]struct{}),
		changed: make(chan struct{}),
	}
	if err := a.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return a, nil
}

// Path returns the path of the socket.
func (a *Acpid) Path() string { return a.path }

// Start listens on the socket again after [Acpid.Stop], as acpid does when
// it is restarted. It does nothing if the fake is listening already, and
// fails after Close.
func (a *Acpid) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return errors.New("acpitest: Acpid is closed")
	}
	if a.ln != nil {
		return nil
	}
	ln, err := net.Listen("unix", a.path)
	if err != nil {
		return fmt.Errorf("acpitest: %w", err)
	}
	a.ln = ln
	a.wg.Add(1)
	go a.accept(ln)
	return nil
}

func (a *Acpid) accept(ln net.Listener) {
	defer a.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // Stop closed ln
		}
		a.mu.Lock()
		if a.ln != ln { // stopped meanwhile
			a.mu.Unlock()
			c.Close()
			return
		}
		a.conns[c] = struct{}{}
		a.accepted++
		a.notify()
		a.wg.Add(1)
		a.mu.Unlock()
		go a.serve(c)
	}
}

// serve waits for the client to hang up: acpid's clients never write.
func (a *Acpid) serve(c net.Conn) {
	defer a.wg.Done()
	io.Copy(io.Discard, c)
	a.drop(c)
}

func (a *Acpid) drop(c net.Conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.conns[c]; ok {
		delete(a.conns, c)
		c.Close()
		a.notify()
	}
}

// notify wakes WaitClients; a.mu must be held.
func (a *Acpid) notify() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// Stop makes the fake act as acpid exiting: it stops listening, removes
// the socket file and closes every client's connection. It returns once
// the fake's goroutines have ended. [Acpid.Start] starts it again.
func (a *Acpid) Stop() {
	a.mu.Lock()
	if a.ln != nil {
		a.ln.Close() // and removes the socket file
		a.ln = nil
	}
	for c := range a.conns {
		c.Close()
		delete(a.conns, c)
	}
	a.notify()
	a.mu.Unlock()
	a.wg.Wait()
}

// Close stops the fake for good and removes its directory.
func (a *Acpid) Close() error {
	a.Stop()
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	return os.RemoveAll(a.dir)
}

// Clients returns the number of clients connected now.
func (a *Acpid) Clients() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.conns)
}

// Accepted returns the number of connections accepted since NewAcpid, so
// that a test can tell a reconnection from the first connection.
func (a *Acpid) Accepted() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.accepted
}

// WaitClients waits until exactly n clients are connected, or ctx is done.
// A test uses it, rather than a sleep, to know that the source under test
// has connected before it sends a line (n = 1), or has hung up (n = 0).
func (a *Acpid) WaitClients(ctx context.Context, n int) error {
	return a.wait(ctx, func() bool { return len(a.conns) == n })
}

// WaitAccepted waits until at least n connections have been accepted since
// NewAcpid (see [Acpid.Accepted]) and are still connected, or ctx is done.
func (a *Acpid) WaitAccepted(ctx context.Context, n int) error {
	return a.wait(ctx, func() bool { return a.accepted >= n && len(a.conns) > 0 })
}

func (a *Acpid) wait(ctx context.Context, cond func() bool) error {
	for {
		a.mu.Lock()
		ok, ch := cond(), a.changed
		a.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("acpitest: waiting for clients: %w", ctx.Err())
		}
	}
}

// Send writes line and a newline to every connected client and returns
// how many clients it was written to. A client whose write fails is
// disconnected, and the errors are returned.
func (a *Acpid) Send(line string) (int, error) {
	return a.SendRaw([]byte(line + "\n"))
}

// SendRaw writes b as it is (a partial line, several lines, garbage) to
// every connected client, like Send.
func (a *Acpid) SendRaw(b []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock() // held while writing, so that sends keep their order
	n := 0
	var errs []error
	for c := range a.conns {
		c.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := c.Write(b); err != nil {
			errs = append(errs, err)
			delete(a.conns, c)
			c.Close()
			a.notify()
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// PressPowerButton sends the two lines that acpid sends for one press of
// the power button, [PowerButtonInputLine] then [PowerButtonLine].
func (a *Acpid) PressPowerButton() (int, error) {
	return a.SendRaw([]byte(PowerButtonInputLine + "\n" + PowerButtonLine + "\n"))
}

package httpguard

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A rawConn reads and writes a connection's non-blocking socket with raw
// system calls, through its [syscall.RawConn]: when the socket has nothing
// to read or no room to write, the call says EAGAIN and the goroutine
// waits in the runtime's netpoller, as with net.Conn, and deadlines and
// Close end that wait as they do for net.Conn.
//
// What it saves: an ordinary system call tells the scheduler that it
// enters the kernel, since it might block, and the first one after an idle
// spell wakes the runtime's monitor thread (sysmon), which then checks the
// program every 20 µs until it is idle again. A poller that asks one
// question a second pays that twice per request (the write, and the read
// once the answer is there), which was a fifth of its wakeups at idle.
// A call on a non-blocking socket cannot block, so it needs none of that.
type rawConn struct {
	net.Conn
	rc syscall.RawConn
}

// newRawConn returns c reading and writing by raw system calls, except
// under the race detector: it sees the happens-before of a socket's I/O
// only in the syscall package's calls, and would report races that are
// none (a server's handler writes a variable, then answers; the client
// reads the variable once it has the answer).
func newRawConn(c net.Conn) net.Conn {
	if raceEnabled {
		return c
	}
	return wrapRaw(c)
}

// wrapRaw returns c reading and writing by raw system calls, or c itself
// if it has no file descriptor.
func wrapRaw(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &rawConn{Conn: c, rc: rc}
}

func (c *rawConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var (
		n     int
		errno syscall.Errno
	)
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			m, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // wait until readable
			}
			n, errno = int(m), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *rawConn) Write(p []byte) (int, error) {
	var (
		written int
		errno   syscall.Errno
	)
	err := c.rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			m, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[written])), uintptr(len(p)-written))
			switch e {
			case 0:
				written += int(m)
			case unix.EINTR:
			case unix.EAGAIN:
				return false // wait until writable
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err == nil && errno != 0 {
		err = &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errno}
	}
	return written, err
}

// SyscallConn returns the connection's RawConn.
func (c *rawConn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

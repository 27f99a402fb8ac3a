package httpguard

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// quiet says whether c has nothing to read (neither bytes nor an end), as
// a kept connection should: a recv with MSG_PEEK|MSG_DONTWAIT.
func quiet(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var b [1]byte
	q := false
	err = rc.Read(func(fd uintptr) bool {
		_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		q = e == unix.EAGAIN
		return true
	})
	return err == nil && q
}

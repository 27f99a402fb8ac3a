//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package httpguard

import (
	"net"
	"syscall"

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
	err = rc.Control(func(fd uintptr) {
		_, _, e := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		q = e == unix.EAGAIN
	})
	return err == nil && q
}

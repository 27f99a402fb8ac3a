package httpguard

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// fionread is FIONREAD, _IOR('f', 127, u_long), which x/sys/windows lacks.
const fionread = 0x4004667f

// quiet says whether c has no bytes to read, as a kept connection should:
// FIONREAD, which a socket answers without blocking. It does not see the
// server's end of the connection (a peek would block): a request on a
// connection the server closed fails and is sent again on a new one.
func quiet(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	q := false
	err = rc.Control(func(fd uintptr) {
		var n, ret uint32
		e := windows.WSAIoctl(windows.Handle(fd), fionread, nil, 0, (*byte)(unsafe.Pointer(&n)), uint32(unsafe.Sizeof(n)), &ret, nil, 0)
		q = e == nil && n == 0
	})
	return err == nil && q
}

package logind

import (
	"net"
	"syscall"

	"github.com/godbus/dbus/v5"
)

// supported reports whether logind can exist on this system.
func supported() error { return nil }

// syscallClose closes a descriptor received from the bus.
func syscallClose(fd int) { _ = syscall.Close(fd) }

// dialUnixConn makes a bus connection over uc, which can take descriptors.
func dialUnixConn(uc *net.UnixConn, opts ...dbus.ConnOption) (*dbus.Conn, error) {
	return dbus.DialUnix(uc, opts...)
}

//go:build !linux

package logind

import (
	"errors"
	"fmt"
	"net"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
)

// supported reports whether logind can exist on this system.
func supported() error { return fmt.Errorf("%w: %w", errNotLinux, termsig.ErrUnavailable) }

var errNotLinux = errors.New("logind: systemd-logind runs on Linux only")

// syscallClose does nothing: the source never connects here.
func syscallClose(int) {}

// dialUnixConn fails: the source never connects here (godbus has no
// DialUnix on every system).
func dialUnixConn(*net.UnixConn, ...dbus.ConnOption) (*dbus.Conn, error) { return nil, errNotLinux }

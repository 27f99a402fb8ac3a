//go:build !linux && !windows && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package httpguard

import "net"

func quiet(net.Conn) bool { return true }

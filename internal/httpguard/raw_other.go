//go:build !linux

package httpguard

import "net"

// newRawConn returns c: raw system calls are a Linux measure (see
// raw_linux.go).
func newRawConn(c net.Conn) net.Conn { return c }

//go:build !unix

package main

import (
	"fmt"
	"io"
)

// watchMain: print, hook and supervise need a POSIX system (hooks run
// through /bin/sh, commands are supervised by process group).
func watchMain(cmd string, _ []string, _, stderr io.Writer) int {
	fmt.Fprintf(stderr, "termsig %s: needs Linux or macOS (process groups and /bin/sh); sources and fake work here\n", cmd)
	return exitFailed
}

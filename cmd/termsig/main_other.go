//go:build !unix

// Command watch needs a POSIX system: it runs hooks through /bin/sh and
// supervises commands by process group. See README.md.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "watch: needs Linux or macOS (process groups and /bin/sh)")
	os.Exit(1)
}

//go:build !linux

// Command runner is an example CI runner built on termsig. It runs jobs in
// process groups that die with the runner, and re-executes itself in place
// on SIGHUP, which it does for Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "runner: this example needs Linux")
	os.Exit(2)
}

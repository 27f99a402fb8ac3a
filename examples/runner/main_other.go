//go:build !linux

// Command runner is an example CI runner built on termsig. It runs jobs in
// process groups that die with the runner (Pdeathsig), which needs Linux.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "runner: this example needs Linux")
	os.Exit(2)
}

//go:build !linux

// Command runner is an example CI runner built on termsig. It runs jobs in
// process groups that die with the runner, and re-executes itself in place
// on SIGHUP, which it does for Linux only.
package main

import (
	"fmt"
	"os"

	"github.com/termsig/termsig/internal/buildinfo"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(buildinfo.Line("runner"))
		return
	}
	fmt.Fprintln(os.Stderr, "runner: this example needs Linux")
	os.Exit(2)
}

//go:build !unix

// Command ghrunner runs a GitHub Actions self-hosted runner and cleans up
// after it before the machine goes away. It supervises run.sh in a process
// group of its own, which needs a Unix system.
package main

import (
	"fmt"
	"os"

	"github.com/termsig/termsig/internal/buildinfo"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(buildinfo.Line("ghrunner"))
		return
	}
	fmt.Fprintln(os.Stderr, "ghrunner: only Unix systems are supported (Linux, macOS)")
	os.Exit(2)
}

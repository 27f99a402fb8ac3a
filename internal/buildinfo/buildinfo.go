// Package buildinfo gives the version line that termsig's binaries print
// for --version, from the build information the go command records.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version returns the version of the main module of the running binary:
// the module version for a binary built by `go install path@version`, a
// pseudo-version or "(devel)" for one built in a checkout (with the
// commit and "+dirty" when the go command recorded them), or "unknown"
// when the binary carries no build information.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return version(bi)
}

func version(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v != "" && v != "(devel)" {
		return v
	}
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	switch {
	case rev == "":
		return v
	case modified == "true":
		return v + " " + rev + "+dirty"
	default:
		return v + " " + rev
	}
}

// Line returns the line that binary name prints for --version, such as
// "termsig v0.1.0 go1.26.8 linux/amd64".
func Line(name string) string {
	return fmt.Sprintf("%s %s %s %s/%s", name, Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

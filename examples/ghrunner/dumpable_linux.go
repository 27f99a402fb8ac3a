package main

import "golang.org/x/sys/unix"

// hideFromSameUser makes ghrunner's /proc files (its environment, where
// $GITHUB_TOKEN may be) root's and forbids ptrace by processes of its own
// user, such as a job when ghrunner runs without -user. Its children are
// not affected: execve makes them dumpable again.
func hideFromSameUser() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

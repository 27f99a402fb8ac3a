package main

import "golang.org/x/sys/unix"

// hideFromSameUser makes the runner's /proc files (its environment, where
// the join token may be; its working directory and root, the way to its
// state file) root's, and forbids ptrace by processes of its own user,
// such as a job run without -user. It does not stop them from signalling
// the runner, nor from opening its files by their paths. Its children are
// not affected: execve makes them dumpable again, and a re-executed runner
// calls it again.
func hideFromSameUser() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

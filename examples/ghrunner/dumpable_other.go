//go:build unix && !linux

package main

// hideFromSameUser does nothing here: only Linux has PR_SET_DUMPABLE.
func hideFromSameUser() error { return nil }

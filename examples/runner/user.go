//go:build linux

package main

import (
	"fmt"
	"os"
	"syscall"

	"github.com/termsig/termsig/internal/runas"
)

// A jobUser is the user that jobs run as (-user), when it is not the
// runner's own. The runner then runs as root, and its files (the state
// file with its token, the join token's) are out of the jobs' reach, and so
// are its /proc files and the runner itself (ptrace, signals).
type jobUser struct {
	name, home string
	uid, gid   int
	credential *syscall.Credential
}

// lookupJobUser resolves name; "" or the runner's own user is (nil, nil).
// To run jobs as another user the runner must run as root.
func lookupJobUser(name string) (*jobUser, error) {
	if name == "" {
		return nil, nil
	}
	a, err := runas.Lookup(name)
	if err != nil {
		return nil, err
	}
	switch {
	case a.UID == os.Geteuid():
		return nil, nil
	case os.Geteuid() != 0:
		return nil, fmt.Errorf("%s: the runner must run as root to run jobs as another user", name)
	}
	cred, err := a.Credential()
	if err != nil {
		return nil, err
	}
	return &jobUser{name: a.Name, home: a.Home, uid: a.UID, gid: a.GID, credential: cred}, nil
}

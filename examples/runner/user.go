//go:build linux

package main

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
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
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%s: uid %q, gid %q are not numbers", name, u.Uid, u.Gid)
	}
	switch {
	case int(uid) == os.Geteuid():
		return nil, nil
	case os.Geteuid() != 0:
		return nil, fmt.Errorf("%s: the runner must run as root to run jobs as another user", name)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("%s: its groups: %w", name, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			cred.Groups = append(cred.Groups, uint32(n))
		}
	}
	return &jobUser{name: u.Username, home: u.HomeDir, uid: int(uid), gid: int(gid), credential: cred}, nil
}

//go:build unix

package main

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// A runAs is the user config.sh and run.sh run as (-user), when it is not
// ghrunner's own. ghrunner then runs as root and keeps the API token to
// itself: a job of that user can read neither its environment nor its
// token file.
type runAs struct {
	name       string
	home       string
	credential *syscall.Credential
}

// lookupUser resolves -user; "" or ghrunner's own user means none.
func lookupUser(name string) (*runAs, error) {
	if name == "" {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("-user: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("-user %s: uid %q, gid %q are not numbers", name, u.Uid, u.Gid)
	}
	if int(uid) == os.Geteuid() {
		return nil, nil
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("-user %s: ghrunner must run as root to start the runner as another user", name)
	}
	if uid == 0 {
		return nil, fmt.Errorf("-user %s: the runner must not run as root (run.sh refuses to)", name)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("-user %s: its groups: %w", name, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			cred.Groups = append(cred.Groups, uint32(n))
		}
	}
	return &runAs{name: u.Username, home: u.HomeDir, credential: cred}, nil
}

// sysProcAttr is what config.sh and run.sh start with: a process group
// of their own, and the -user's credentials.
func (r *runAs) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if r != nil {
		attr.Credential = r.credential
	}
	return attr
}

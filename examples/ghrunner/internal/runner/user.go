//go:build unix

package runner

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// A User is the user config.sh and run.sh run as, when it is not
// ghrunner's own. ghrunner then runs as root and keeps the API token to
// itself: a job of that user can read neither its environment nor its
// token file.
type User struct {
	Name string
	Home string

	credential *syscall.Credential
}

// LookupUser resolves name; "" or ghrunner's own user is (nil, nil). To
// run the runner as another user ghrunner must run as root, and the user
// must not be root.
func LookupUser(name string) (*User, error) {
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
	if int(uid) == os.Geteuid() {
		return nil, nil
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%s: ghrunner must run as root to start the runner as another user", name)
	}
	if uid == 0 {
		return nil, fmt.Errorf("%s: the runner must not run as root (run.sh refuses to)", name)
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
	return &User{Name: u.Username, Home: u.HomeDir, credential: cred}, nil
}

// sysProcAttr is what config.sh and run.sh start with: a process group
// of their own, and u's credentials.
func (u *User) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if u != nil {
		attr.Credential = u.credential
	}
	return attr
}

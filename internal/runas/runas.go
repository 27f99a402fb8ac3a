//go:build unix

// Package runas resolves the account that the examples' runners start
// their jobs (or the GitHub runner) as: its ids, home and groups, as
// syscall.Credential wants them. What is allowed (which users, whether
// the caller must be root) is each caller's to decide.
package runas

import (
	"fmt"
	"os/user"
	"strconv"
	"syscall"
)

// An Account is a user, resolved.
type Account struct {
	Name, Home string
	UID, GID   int

	u *user.User
}

// Lookup resolves the user named name.
func Lookup(name string) (*Account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%s: uid %q, gid %q are not numbers", name, u.Uid, u.Gid)
	}
	return &Account{Name: u.Username, Home: u.HomeDir, UID: int(uid), GID: int(gid), u: u}, nil
}

// Credential returns a's ids with its supplementary groups, for
// syscall.SysProcAttr.Credential.
func (a *Account) Credential() (*syscall.Credential, error) {
	cred := &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID)}
	gids, err := a.u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("%s: its groups: %w", a.Name, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			cred.Groups = append(cred.Groups, uint32(n))
		}
	}
	return cred, nil
}

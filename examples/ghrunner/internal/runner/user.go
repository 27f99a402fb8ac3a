//go:build unix

package runner

import (
	"fmt"
	"os"
	"syscall"

	"github.com/termsig/termsig/internal/runas"
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
	a, err := runas.Lookup(name)
	if err != nil {
		return nil, err
	}
	if a.UID == os.Geteuid() {
		return nil, nil
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%s: ghrunner must run as root to start the runner as another user", name)
	}
	if a.UID == 0 {
		return nil, fmt.Errorf("%s: the runner must not run as root (run.sh refuses to)", name)
	}
	cred, err := a.Credential()
	if err != nil {
		return nil, err
	}
	return &User{Name: a.Name, Home: a.Home, credential: cred}, nil
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

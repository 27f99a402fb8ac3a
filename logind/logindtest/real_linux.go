package logindtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// realConf is the logind.conf drop-in of a RealLogind: no VTs to spawn,
// no keys to handle, nobody's processes to kill.
const realConf = `[Login]
NAutoVTs=0
ReserveVT=0
KillUserProcesses=no
HandlePowerKey=ignore
HandleSuspendKey=ignore
HandleHibernateKey=ignore
HandleLidSwitch=ignore
HandleRebootKey=ignore
IdleAction=ignore
`

// mountRun is run by sh in logind's new mount namespace (private, so
// that nothing mounted there is seen outside): the test's directory
// becomes /run, and logind starts with it. --no-mtab, because mount
// would otherwise create /run/mount (its utab) in the machine's /run,
// before the bind mount hides it.
const mountRun = `mount --no-mtab --bind "$1" /run && exec "$2"`

// RealMissing says why the real logind cannot run here, or returns nil.
func RealMissing(c RealConfig) error {
	prog := c.Program
	if prog == "" {
		prog = DefaultProgram
	}
	if _, err := os.Stat(prog); err != nil {
		return fmt.Errorf("logindtest: no systemd-logind at %s (install Debian's systemd package: apt-get install -y systemd)", prog)
	}
	if os.Geteuid() != 0 {
		return errors.New("logindtest: the real systemd-logind runs as root, in a mount namespace of its own: run the tests as root")
	}
	for _, p := range []string{"sh", "mount"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("logindtest: the real systemd-logind needs %s to start in its own /run: %w", p, err)
		}
	}
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		return ErrNoDaemon
	}
	return nil
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p process) kill() error {
	err := p.cmd.Process.Kill()
	<-p.done
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	return err
}

// NewReal starts systemd-logind on the bus at address, in a mount
// namespace whose /run is a new directory, and returns once it owns
// org.freedesktop.login1. Close it when done. The bus needs a [Systemd]
// for logind to shut down.
func NewReal(address string, c RealConfig) (*RealLogind, error) {
	if err := RealMissing(c); err != nil {
		return nil, err
	}
	prog := c.Program
	if prog == "" {
		prog = DefaultProgram
	}
	run, err := os.MkdirTemp("", "termsig-run")
	if err != nil {
		return nil, err
	}
	conf := realConf
	if c.InhibitDelayMax > 0 {
		conf += fmt.Sprintf("InhibitDelayMaxSec=%dms\n", c.InhibitDelayMax.Milliseconds())
	}
	dropIn := filepath.Join(run, "systemd", "logind.conf.d")
	err = os.MkdirAll(dropIn, 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(dropIn, "termsig.conf"), []byte(conf), 0o644)
	}
	if err != nil {
		os.RemoveAll(run)
		return nil, err
	}
	conn, err := dbus.Connect(address)
	if err != nil {
		os.RemoveAll(run)
		return nil, fmt.Errorf("logindtest: connect: %w", err)
	}
	l := &RealLogind{conn: conn, run: run, address: address, prog: prog}
	if err := l.start(""); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Restart kills logind (SIGKILL, as a crash does) and starts it again on
// the same /run, as systemd restarts it: it restores its inhibitors from
// /run/systemd/inhibit, and a scheduled shutdown from
// /run/systemd/shutdown/scheduled. It returns once the new logind owns
// its name.
func (l *RealLogind) Restart() error {
	old, err := l.UniqueName()
	if err != nil {
		return err
	}
	l.mu.Lock()
	cmd := l.cmd
	l.cmd = nil
	l.mu.Unlock()
	if cmd != nil {
		if err := cmd.kill(); err != nil {
			return err
		}
	}
	return l.start(old)
}

// start starts logind and waits until it owns its name, in place of old.
func (l *RealLogind) start(old string) error {
	cmd := exec.Command("sh", "-c", mountRun, "sh", l.run, l.prog)
	cmd.Env = append(os.Environ(),
		"DBUS_SYSTEM_BUS_ADDRESS="+l.address,
		"SYSTEMD_LOG_LEVEL=debug", "SYSTEMD_LOG_TARGET=console", "SYSTEMD_LOG_TIME=1")
	cmd.Stdout, cmd.Stderr = l, l
	// Pdeathsig: logind does not outlive a test binary that dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("logindtest: start %s: %w", l.prog, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	l.mu.Lock()
	l.cmd = process{cmd, done}
	l.mu.Unlock()
	if err := waitOwner(l.conn, BusName, old, done); err != nil {
		return fmt.Errorf("logindtest: %s did not start: %v:\n%s", l.prog, err, l.Output())
	}
	return nil
}

// startTimeoutReal bounds how long logind may take to own its name.
const startTimeoutReal = 10 * time.Second

// waitOwner waits until name has an owner on conn's bus other than old,
// or exited is closed (the program ended), or the timeout passes.
func waitOwner(conn *dbus.Conn, name, old string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeoutReal)
	defer cancel()
	sigs := make(chan *dbus.Signal, 16)
	conn.Signal(sigs)
	defer conn.RemoveSignal(sigs)
	if err := conn.AddMatchSignal(dbus.WithMatchSender("org.freedesktop.DBus"), dbus.WithMatchMember("NameOwnerChanged"), dbus.WithMatchArg(0, name)); err != nil {
		return err
	}
	for {
		var owner string
		if conn.BusObject().Call("org.freedesktop.DBus.GetNameOwner", 0, name).Store(&owner) == nil && owner != old {
			return nil
		}
		select {
		case <-sigs:
		case <-exited:
			return errors.New("it exited")
		case <-ctx.Done():
			return fmt.Errorf("%s has no owner after %v", name, startTimeoutReal)
		}
	}
}

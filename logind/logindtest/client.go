package logindtest

import (
	"fmt"
	"os"

	"github.com/godbus/dbus/v5"
)

// What a program other than the one under test asks of logind, fake or
// real, each on a connection of its own.

// Inhibit takes a lock from the logind on the bus at address, fake or
// real, on a connection of its own, as systemd-inhibit does: another
// program's lock, which holds the shutdown until the file is closed.
func Inhibit(address, what, who, why, mode string) (*os.File, error) {
	conn, err := dbus.Connect(address)
	if err != nil {
		return nil, fmt.Errorf("logindtest: connect: %w", err)
	}
	defer conn.Close()
	var fd dbus.UnixFD
	if err := conn.Object(BusName, Path).Call(Interface+".Inhibit", 0, what, who, why, mode).Store(&fd); err != nil {
		return nil, fmt.Errorf("logindtest: Inhibit: %w", err)
	}
	return os.NewFile(uintptr(fd), "inhibitor"), nil
}

// ListInhibitors lists the locks held, as `systemd-inhibit --list` does,
// from the logind on the bus at address, fake or real: each Inhibitor
// with What, Who, Why, Mode, UID and PID.
func ListInhibitors(address string) ([]Inhibitor, error) {
	conn, err := dbus.Connect(address)
	if err != nil {
		return nil, fmt.Errorf("logindtest: connect: %w", err)
	}
	defer conn.Close()
	var list []struct {
		What, Who, Why, Mode string
		UID, PID             uint32
	}
	if err := conn.Object(BusName, Path).Call(Interface+".ListInhibitors", 0).Store(&list); err != nil {
		return nil, fmt.Errorf("logindtest: ListInhibitors: %w", err)
	}
	out := make([]Inhibitor, len(list))
	for i, l := range list {
		out[i] = Inhibitor{What: l.What, Who: l.Who, Why: l.Why, Mode: l.Mode, UID: l.UID, PID: l.PID}
	}
	return out, nil
}

package logindtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
)

// The names the service manager is reached by.
const (
	SystemdBusName   = "org.freedesktop.systemd1"
	SystemdPath      = dbus.ObjectPath("/org/freedesktop/systemd1")
	SystemdInterface = "org.freedesktop.systemd1.Manager"
)

// unitPrefix is where systemd exports its units: the unit's name escaped
// as sd_bus_path_encode does, below it.
const unitPrefix = "/org/freedesktop/systemd1/unit"

// A Job is a StartUnit call that a [Systemd] answered.
type Job struct {
	ID         uint32
	Unit, Mode string
	Path       dbus.ObjectPath // the job's object path, as answered
	Sender     string          // unique bus name of the caller
	At         time.Time       // when the call came
}

// A Systemd is a stub org.freedesktop.systemd1 on a bus: what a real
// systemd-logind needs of the service manager to carry out a shutdown.
// Its Manager answers Subscribe, Unsubscribe and StartUnit (which starts
// nothing: it records the job and answers its path, and no JobRemoved
// follows unless the test calls FinishJob, as when the machine goes
// down); each unit's LoadState is
// "loaded" for the shutdown targets and "not-found" for any other. Its
// methods are safe for concurrent use.
type Systemd struct {
	conn *dbus.Conn

	mu      sync.Mutex
	jobs    []Job
	changed chan struct{} // closed and replaced when a job is added
}

// NewSystemd connects to the bus at address, takes the name
// org.freedesktop.systemd1 and serves the stub. Close it when done.
func NewSystemd(address string) (*Systemd, error) {
	conn, err := dbus.Connect(address)
	if err != nil {
		return nil, fmt.Errorf("logindtest: connect: %w", err)
	}
	s := &Systemd{conn: conn, changed: make(chan struct{})}
	err = conn.Export(systemdManager{s}, SystemdPath, SystemdInterface)
	if err == nil {
		err = conn.ExportSubtree(unitProperties{}, unitPrefix, propsInterface)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	reply, err := conn.RequestName(SystemdBusName, dbus.NameFlagDoNotQueue)
	if err == nil && reply != dbus.RequestNameReplyPrimaryOwner {
		err = fmt.Errorf("%s is taken on this bus", SystemdBusName)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("logindtest: request name: %w", err)
	}
	return s, nil
}

// Jobs returns the StartUnit calls answered so far, in order.
func (s *Systemd) Jobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Job(nil), s.jobs...)
}

// WaitJob waits until unit has been started, or ctx is done, and returns
// the first job that started it.
func (s *Systemd) WaitJob(ctx context.Context, unit string) (Job, error) {
	for {
		s.mu.Lock()
		changed := s.changed
		jobs := s.jobs
		s.mu.Unlock()
		for _, j := range jobs {
			if j.Unit == unit {
				return j, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Job{}, fmt.Errorf("logindtest: waiting for StartUnit(%q) (%d jobs so far): %w", unit, len(jobs), ctx.Err())
		}
	}
}

// FinishJob ends job j with result ("done", "canceled", "failed"...) as
// systemd does: it emits JobRemoved. A shutdown's job that ends so (the
// machine did not go down) makes logind announce the end of the shutdown,
// PrepareForShutdown(false).
func (s *Systemd) FinishJob(j Job, result string) error {
	return s.conn.Emit(SystemdPath, SystemdInterface+".JobRemoved", j.ID, j.Path, j.Unit, result)
}

// Close leaves the bus.
func (s *Systemd) Close() error { return s.conn.Close() }

type systemdManager struct{ s *Systemd }

// Subscribe and Unsubscribe are what logind calls to hear of jobs; the
// stub sends no job signals.
func (systemdManager) Subscribe() *dbus.Error   { return nil }
func (systemdManager) Unsubscribe() *dbus.Error { return nil }

// StartUnit records the job and starts nothing.
func (m systemdManager) StartUnit(msg dbus.Message, name, mode string) (dbus.ObjectPath, *dbus.Error) {
	sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	id := uint32(len(s.jobs) + 1)
	path := dbus.ObjectPath(fmt.Sprintf("/org/freedesktop/systemd1/job/%d", id))
	s.jobs = append(s.jobs, Job{ID: id, Unit: name, Mode: mode, Path: path, Sender: sender, At: time.Now()})
	close(s.changed)
	s.changed = make(chan struct{})
	return path, nil
}

// unitProperties answers the properties of any unit.
type unitProperties struct{}

// Get answers LoadState; logind reads it before it shuts down.
func (unitProperties) Get(msg dbus.Message, iface, name string) (dbus.Variant, *dbus.Error) {
	path, _ := msg.Headers[dbus.FieldPath].Value().(dbus.ObjectPath)
	if iface != "org.freedesktop.systemd1.Unit" || name != "LoadState" {
		return dbus.Variant{}, dbus.NewError("org.freedesktop.DBus.Error.UnknownProperty", []any{"Unknown property " + name})
	}
	state := "not-found"
	switch unitName(path) {
	case "poweroff.target", "reboot.target", "halt.target", "kexec.target", "soft-reboot.target":
		state = "loaded"
	}
	return dbus.MakeVariant(state), nil
}

// unitName decodes a unit's object path ("…/unit/poweroff_2etarget").
func unitName(path dbus.ObjectPath) string {
	enc, ok := strings.CutPrefix(string(path), unitPrefix+"/")
	if !ok {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(enc); i++ {
		if enc[i] == '_' && i+2 < len(enc) {
			var c byte
			if _, err := fmt.Sscanf(enc[i+1:i+3], "%02x", &c); err == nil {
				b.WriteByte(c)
				i += 2
				continue
			}
		}
		b.WriteByte(enc[i])
	}
	return b.String()
}

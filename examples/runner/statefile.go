//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A savedState is what the runner keeps in its state file (-state), so
// that it outlives the runner's process: its registration, with the token
// that only it knows, and a result that the CI service has not taken yet.
// The image that a SIGHUP re-executes resumes the registration; the next
// start after an exit or a crash delivers the result (a job that ended
// while the CI service was down is reported once, not run again) and
// removes the registration, which re-queues the job it was running.
type savedState struct {
	Service string         `json:"service"` // the CI service's URL: the file of another is ignored
	ID      string         `json:"id,omitempty"`
	Token   string         `json:"token,omitempty"`
	LeaseMS int64          `json:"lease_ms,omitempty"`
	Pending *pendingReport `json:"pending,omitempty"`
}

// A pendingReport is the result of a job that the CI service has not
// taken yet: how it ended, or, with Requeue, that it was interrupted and
// goes back to the queue. The runner claims nothing until it is
// delivered: the CI service gives a runner one job at a time, and still
// counts this one.
type pendingReport struct {
	Job     Job    `json:"job"`
	Result  Result `json:"result"`
	Requeue bool   `json:"requeue,omitempty"`
}

func (s savedState) registration() Registration {
	return Registration{ID: s.ID, Token: secret(s.Token), Lease: time.Duration(s.LeaseMS) * time.Millisecond}
}

// defaultStatePath is where the state file goes by default: the unit's
// StateDirectory under systemd, else the current directory.
func defaultStatePath() string {
	dir, _, _ := strings.Cut(os.Getenv("STATE_DIRECTORY"), ":")
	return filepath.Join(dir, "runner-state.json")
}

// loadSaved reads the state file at path. A missing file is an empty
// state.
func loadSaved(path string) (savedState, error) {
	var s savedState
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &s)
	}
	return s, err
}

// writeSaved replaces the state file at path with s, readable by its
// owner only. The rename makes the change atomic: a runner killed at any
// moment leaves the old state or the new one (a power cut may lose the
// last change, which costs a re-run at worst).
func writeSaved(path string, s savedState) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	// A new file of a name nobody could have planted (a link, or a file
	// of looser mode, that the token would be written through).
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// load takes up what the state file holds: the registration to resume or
// to remove, and the result to deliver. An unreadable file, or the file of
// another CI service, is ignored (and overwritten at the first change).
func (r *runner) load() {
	if r.cfg.statePath == "" {
		return
	}
	s, err := loadSaved(r.cfg.statePath)
	switch {
	case err != nil:
		r.tl.Printf("ignoring the state file %s: %v", r.cfg.statePath, err)
	case s.ID != "" && s.Service != r.cfg.service:
		r.tl.Printf("ignoring the state file %s: it is for the CI service %s", r.cfg.statePath, s.Service)
	default:
		r.reg, r.pending = s.registration(), s.Pending
	}
}

// save writes the registration and the pending result to the state file.
func (r *runner) save() {
	if r.cfg.statePath == "" {
		return
	}
	err := writeSaved(r.cfg.statePath, savedState{
		Service: r.cfg.service, ID: r.reg.ID, Token: r.reg.Token.reveal(),
		LeaseMS: r.reg.Lease.Milliseconds(), Pending: r.pending,
	})
	r.warn("saving the state file", err)
}

// setPending sets the result to deliver, and saves it.
func (r *runner) setPending(p *pendingReport) {
	r.pending = p
	r.save()
}

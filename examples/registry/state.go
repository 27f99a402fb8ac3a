package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stateVersion is written into the state file so that pointing -state at
// some other JSON file is refused instead of overwritten. Version 2 added
// the runners' token hashes; a version 1 file is refused.
const stateVersion = 2

// state is everything the registry knows, exactly as it is written to the
// state file. A committed state is never modified: a change is made to a
// clone, which replaces it once it is on disk (see Server.change), so readers
// may use a committed state without holding the lock.
type state struct {
	Version    int            `json:"version"`
	NextRunner int            `json:"next_runner"` // number of the next runner id
	NextJob    int            `json:"next_job"`    // number of the next job id
	Runners    []runnerRecord `json:"runners"`     // by id
	Jobs       []jobRecord    `json:"jobs"`        // by id, that is by creation
}

// runnerRecord is a Runner plus the hash of its token (see tokenHash),
// which the API never shows.
type runnerRecord struct {
	Runner
	TokenHash string `json:"token_sha256"`
}

// jobRecord is a Job plus what the registry needs but does not show.
type jobRecord struct {
	Job
	// AttemptStarted is when the running attempt was claimed; it goes into
	// the Attempt written to History when the attempt ends.
	AttemptStarted time.Time `json:"attempt_started,omitzero"`
}

func newState() *state {
	return &state{Version: stateVersion, NextRunner: 1, NextJob: 1, Runners: []runnerRecord{}, Jobs: []jobRecord{}}
}

func (st *state) clone() *state {
	c := *st
	c.Runners = make([]runnerRecord, len(st.Runners))
	for i, r := range st.Runners {
		r.Labels = slices.Clone(r.Labels)
		c.Runners[i] = r
	}
	c.Jobs = make([]jobRecord, len(st.Jobs))
	for i, j := range st.Jobs {
		j.ExitCode = cloneInt(j.ExitCode)
		j.History = slices.Clone(j.History)
		for k := range j.History {
			j.History[k].ExitCode = cloneInt(j.History[k].ExitCode)
		}
		c.Jobs[i] = j
	}
	return &c
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func (st *state) runner(id string) (int, *runnerRecord) {
	for i := range st.Runners {
		if st.Runners[i].ID == id {
			return i, &st.Runners[i]
		}
	}
	return -1, nil
}

func (st *state) job(id string) *jobRecord {
	for i := range st.Jobs {
		if st.Jobs[i].ID == id {
			return &st.Jobs[i]
		}
	}
	return nil
}

// loadState reads the state file at path; a missing file is an empty state,
// provided that its directory exists, so that a mistyped -state fails at
// start-up rather than at the first change. Once the state is loaded, the
// temporary files of saves that a crash cut short are removed.
func loadState(path string) (*state, error) {
	st, err := readState(path)
	if err != nil {
		return nil, err
	}
	removeTemps(path)
	return st, nil
}

func readState(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		dir := filepath.Dir(path)
		if fi, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("registry: state file %s: %w", path, err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("registry: state file %s: %s is not a directory", path, dir)
		}
		return newState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry: state file: %w", err)
	}
	st, err := parseState(data)
	if err != nil {
		return nil, fmt.Errorf("registry: state file %s is corrupt: %w", path, err)
	}
	return st, nil
}

// tempPrefix returns the name prefix of save's temporary files for the
// state file path.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// removeTemps removes what save leaves behind when the registry dies
// between creating its temporary file and renaming it: nothing else writes
// such names, and no save runs before the state is loaded.
func removeTemps(path string) {
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix(path)) && e.Type().IsRegular() {
			os.Remove(filepath.Join(filepath.Dir(path), e.Name()))
		}
	}
}

// parseState decodes and checks a state file. Anything it accepts keeps the
// invariants that the handlers rely on; anything else is an error.
func parseState(data []byte) (*state, error) {
	st, err := decodeState(data)
	if err != nil {
		return nil, err
	}
	if err := st.validate(); err != nil {
		return nil, err
	}
	return st, nil
}

// decodeState decodes one JSON object with no unknown fields, and turns
// the lists that JSON may leave null into empty ones, as the API shows them.
func decodeState(data []byte) (*state, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var st state
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON object")
	}
	st.Runners = orEmpty(st.Runners)
	for i := range st.Runners {
		st.Runners[i].Labels = orEmpty(st.Runners[i].Labels)
	}
	st.Jobs = orEmpty(st.Jobs)
	for i := range st.Jobs {
		st.Jobs[i].History = orEmpty(st.Jobs[i].History)
	}
	return &st, nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// validate checks what the handlers rely on: a known version; ids in the
// registry's own form, in order and below the next ones, so that none is
// given out twice; runners with a name and a token hash; jobs in a known
// state; and a job running on a runner exactly when that runner says it runs
// the job.
func (st *state) validate() error {
	if st.Version != stateVersion {
		return fmt.Errorf("version %d, want %d", st.Version, stateVersion)
	}
	if st.NextRunner < 1 || st.NextJob < 1 {
		return fmt.Errorf("next ids %d and %d must be at least 1", st.NextRunner, st.NextJob)
	}
	runnerIDs := idSequence{kind: "runner", prefix: "r-", next: st.NextRunner}
	for _, r := range st.Runners {
		if err := runnerIDs.check(r.ID); err != nil {
			return err
		}
		if strings.TrimSpace(r.Name) == "" {
			return fmt.Errorf("runner %s: empty name", r.ID)
		}
		if b, err := hex.DecodeString(r.TokenHash); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("runner %s: token_sha256 %q is not a SHA-256 in hex", r.ID, r.TokenHash)
		}
		if err := st.checkRunnerJob(r.Runner); err != nil {
			return err
		}
	}
	jobIDs := idSequence{kind: "job", prefix: "j-", next: st.NextJob}
	for i := range st.Jobs {
		if err := jobIDs.check(st.Jobs[i].ID); err != nil {
			return err
		}
		if err := st.checkJob(&st.Jobs[i]); err != nil {
			return err
		}
	}
	return nil
}

// checkRunnerJob checks that the job a runner says it runs is running on it.
func (st *state) checkRunnerJob(r Runner) error {
	if r.JobID == "" {
		return nil
	}
	if j := st.job(r.JobID); j == nil || j.State != JobRunning || j.RunnerID != r.ID {
		return fmt.Errorf("runner %s: job %q is not running on it", r.ID, r.JobID)
	}
	return nil
}

// checkJob checks one job's state against its runner and its history.
func (st *state) checkJob(j *jobRecord) error {
	if strings.TrimSpace(j.Command) == "" {
		return fmt.Errorf("job %s: empty command", j.ID)
	}
	if j.Attempts < len(j.History) {
		return fmt.Errorf("job %s: %d attempts but %d in its history", j.ID, j.Attempts, len(j.History))
	}
	switch j.State {
	case JobRunning:
		_, r := st.runner(j.RunnerID)
		if r == nil || r.JobID != j.ID || j.Attempts != len(j.History)+1 {
			return fmt.Errorf("job %s: running on %q, which is not running it", j.ID, j.RunnerID)
		}
	case JobQueued, JobSucceeded, JobFailed:
		if j.RunnerID != "" || !j.AttemptStarted.IsZero() || j.Attempts != len(j.History) {
			return fmt.Errorf("job %s: %s but has a runner or an unfinished attempt", j.ID, j.State)
		}
	default:
		return fmt.Errorf("job %s: state %q", j.ID, j.State)
	}
	return nil
}

// An idSequence checks that ids come in the registry's own form and order:
// prefix+N, N increasing, every N below next.
type idSequence struct {
	kind, prefix string
	next, last   int
}

func (s *idSequence) check(id string) error {
	n, ok := idNumber(s.prefix, id)
	if !ok || n <= s.last || n >= s.next {
		return fmt.Errorf("%s id %q: not %sN, out of order or not below next_%s %d", s.kind, id, s.prefix, s.kind, s.next)
	}
	s.last = n
	return nil
}

// idNumber returns N for an id prefix+N written the way the registry writes
// it (decimal, no sign, no leading zero).
func idNumber(prefix, id string) (int, bool) {
	s, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// save writes st to path so that the file holds either the previous state or
// this one, even if the machine loses power half-way: write a temporary file
// in the same directory, fsync it, rename it over the old one, fsync the
// directory so that the rename itself is durable.
//
// An error means that the file still holds the previous state. Once the
// rename is done the new state is what everyone reading the file sees, so a
// failure to fsync the directory after it is only a warning: reporting the
// change as failed would make memory and disk disagree.
func (st *state) save(path string) (warning, err error) {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	data = append(data, '\n')

	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return syncDir(dir), nil
}

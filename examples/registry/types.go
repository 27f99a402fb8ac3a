package registry

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// OutputLimit is how many bytes of a job's output the registry keeps: the
// tail of what the runner reports.
const OutputLimit = 4 << 10

// Runner is a registered runner.
type Runner struct {
	ID           string    `json:"id"` // "r-1", "r-2", ...: never reused, even after a restart
	Name         string    `json:"name"`
	Labels       []string  `json:"labels"` // never null: [] when empty
	RegisteredAt time.Time `json:"registered_at"`
	JobID        string    `json:"job_id,omitempty"` // the job it is running, if any
}

// Registration is the answer to registering: the runner, the secret token
// that it must present (Authorization: Bearer) to claim, report, send
// heartbeats and unregister, and its lease. The registry keeps only a hash of
// the token: it cannot be read back, and GET /runners never shows it.
type Registration struct {
	Runner
	Token string `json:"token"`
	// LeaseMillis is how long the registry keeps the runner registered
	// without a request from it, in milliseconds (see [Config.Lease]).
	LeaseMillis int64 `json:"lease_ms"`
}

// Lease returns LeaseMillis as a duration.
func (r Registration) Lease() time.Duration { return time.Duration(r.LeaseMillis) * time.Millisecond }

// JobState is the state of a job, or how one attempt at it ended.
type JobState string

// A job is [JobQueued], [JobRunning], [JobSucceeded] or [JobFailed].
// [JobInterrupted] is how an attempt can end (in [Attempt.State] and
// [Result.State]); an interrupted job is queued again at once, so a job's own
// State is never JobInterrupted.
const (
	JobQueued      JobState = "queued"
	JobRunning     JobState = "running"
	JobSucceeded   JobState = "succeeded"
	JobFailed      JobState = "failed"
	JobInterrupted JobState = "interrupted"
)

// Attempt is one finished attempt at a job: a claim and how it ended.
type Attempt struct {
	Attempt  int       `json:"attempt"` // 1 for the first claim, 2 for the second, ...
	RunnerID string    `json:"runner_id"`
	State    JobState  `json:"state"` // succeeded, failed or interrupted
	ExitCode *int      `json:"exit_code,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended"`
}

// Job is a command line to run, and what became of it.
type Job struct {
	ID        string    `json:"id"`      // "j-1", "j-2", ...: never reused, even after a restart
	Command   string    `json:"command"` // run by the runner with sh -c
	State     JobState  `json:"state"`
	RunnerID  string    `json:"runner_id,omitempty"` // while running
	Attempts  int       `json:"attempts"`            // how many times it was claimed
	ExitCode  *int      `json:"exit_code,omitempty"` // of the last finished attempt
	Output    string    `json:"output,omitempty"`    // tail of the last finished attempt's output, at most OutputLimit bytes
	History   []Attempt `json:"history"`             // finished attempts, oldest first; never null: []
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Result is what a runner reports when an attempt at a job ends.
type Result struct {
	RunnerID string   `json:"runner_id"`
	State    JobState `json:"state"` // succeeded, failed or interrupted
	ExitCode *int     `json:"exit_code,omitempty"`
	Output   string   `json:"output,omitempty"` // only the last OutputLimit bytes are kept
	Reason   string   `json:"reason,omitempty"`
}

// Sentinels for errors.Is on an [*APIError].
var (
	ErrNotFound     = errors.New("registry: not found")    // status 404
	ErrConflict     = errors.New("registry: conflict")     // status 409
	ErrUnauthorized = errors.New("registry: unauthorized") // status 401 (no token) or 403 (not the right one)
)

// APIError is a non-2xx answer from the registry.
type APIError struct {
	Status  int    // HTTP status code
	Message string // the "error" member of the body, or the body itself if it is not the API's JSON
}

func (e *APIError) Error() string {
	return fmt.Sprintf("registry: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Is reports whether target is [ErrNotFound] and the status 404,
// [ErrConflict] and the status 409, or [ErrUnauthorized] and the status 401
// or 403.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	}
	return false
}

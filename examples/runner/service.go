//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/termsig/termsig/examples/registry"
)

// A CIService is what the runner needs of a CI service. The example
// registry implements it (registryService); a GitHub Actions or GitLab
// implementation would map each method to that service's API (see the
// README). Each method must return soon after ctx is done: the runner
// cancels a request in flight when a notice comes.
type CIService interface {
	// Register registers a runner. Names need not be unique: the
	// registration's token, not the name, identifies it.
	Register(ctx context.Context, name string, labels []string) (Registration, error)
	// Remove unregisters a runner, re-queueing the job it runs, if any.
	// Removing a registration that is gone already is not an error: it
	// is what the caller wanted.
	Remove(ctx context.Context, reg Registration) error
	// Heartbeat tells the CI service that the runner is alive, while it
	// runs a job or claims none (see Registration.Lease). It returns
	// an error wrapping ErrNotRegistered if the registration is gone.
	Heartbeat(ctx context.Context, reg Registration) error
	// Claim hands the runner its next job, or nil when none is queued. It
	// returns an error wrapping ErrNotRegistered if the registration is
	// gone.
	Claim(ctx context.Context, reg Registration) (*Job, error)
	// Report records how a job ended (succeeded or failed). It returns
	// an error wrapping ErrJobGone if the job is no longer this runner's.
	Report(ctx context.Context, reg Registration, job *Job, res Result) error
	// Requeue records that a job was interrupted and puts it back in the
	// queue, so that it is run again rather than left failed. It returns
	// an error wrapping ErrJobGone if the job is no longer this runner's.
	Requeue(ctx context.Context, reg Registration, job *Job, res Result) error
}

// A Registration is the runner's identity at the CI service.
type Registration struct {
	ID    string
	Token secret // presented with each of the runner's requests
	// Lease is how long the CI service keeps the runner registered
	// without a word from it; zero if it keeps it for ever. The runner
	// sends a heartbeat every third of it.
	Lease time.Duration
}

// A secret is a token. It prints as "[redacted]", so that a log line or
// an error that holds one by mistake does not give it away; reveal is
// for the request that needs it.
type secret string

func (secret) String() string   { return "[redacted]" }
func (secret) GoString() string { return "[redacted]" }
func (s secret) reveal() string { return string(s) }

// redact returns text with every occurrence of s replaced.
func (s secret) redact(text string) string {
	if s == "" {
		return text
	}
	return strings.ReplaceAll(text, string(s), "[runner token]")
}

// ErrJobGone is what Report and Requeue return when the CI service no
// longer gives the job to this runner (it was re-queued when the runner's
// registration was removed, or given to another runner): the result can
// never be delivered, and retrying is pointless.
var ErrJobGone = errors.New("the CI service no longer gives this job to this runner")

// ErrNotRegistered is what Heartbeat and Claim return when the CI service
// no longer knows the registration: someone removed it, or its lease
// lapsed. The CI service has re-queued its job already; the runner
// registers again.
var ErrNotRegistered = errors.New("the CI service no longer knows this registration")

// A Job is a command line to run with sh -c.
type Job struct {
	ID      string
	Command string
}

// Result is how one run of a job ended.
type Result struct {
	ExitCode int    // -1 if the job was killed by a signal
	Output   string // the tail of its output
	Reason   string // why it was interrupted, if it was
	Status   string // how it ended, for the log: "exit status 1", "signal: killed"
}

// registryService is the CIService of the example registry. Its client
// presents the join token, for Register; the other requests present the
// registration's own token.
type registryService struct{ c *registry.Client }

// as returns the client that presents reg's token.
func (s registryService) as(reg Registration) *registry.Client {
	return s.c.WithToken(reg.Token.reveal())
}

// Register registers with the join token that s.c presents.
func (s registryService) Register(ctx context.Context, name string, labels []string) (Registration, error) {
	r, err := s.c.Register(ctx, name, labels)
	if errors.Is(err, registry.ErrUnauthorized) {
		err = fmt.Errorf("%w (registering takes the registry's join token: -join-token-file or $%s)", err, joinTokenEnv)
	}
	return Registration{ID: r.ID, Token: secret(r.Token), Lease: r.Lease()}, err
}

func (s registryService) Remove(ctx context.Context, reg Registration) error {
	err := s.as(reg).Remove(ctx, reg.ID)
	if errors.Is(err, registry.ErrNotFound) || errors.Is(err, registry.ErrUnauthorized) {
		return nil // gone, or the id is another registration's now (a registry that lost its state)
	}
	return err
}

func (s registryService) Heartbeat(ctx context.Context, reg Registration) error {
	return notRegistered(s.as(reg).Heartbeat(ctx, reg.ID))
}

// notRegistered wraps ErrNotRegistered around the registry's answer that
// the registration is gone (404), or that the token is not that id's (a
// registry that lost its state and gave the id to another runner).
func notRegistered(err error) error {
	if errors.Is(err, registry.ErrNotFound) || errors.Is(err, registry.ErrUnauthorized) {
		return fmt.Errorf("%w (%v)", ErrNotRegistered, err)
	}
	return err
}

// Claim claims the next job. If the registry says the runner already runs
// a job (the answer to an earlier claim was lost), that job is one this
// runner knows nothing of: it is handed back to the queue, and the claim is
// made again.
func (s registryService) Claim(ctx context.Context, reg Registration) (*Job, error) {
	c := s.as(reg)
	j, err := c.Claim(ctx, reg.ID)
	if errors.Is(err, registry.ErrConflict) {
		if lost := s.heldBy(ctx, reg.ID); lost != "" {
			code := -1
			_, rerr := c.Report(ctx, lost, registry.Result{
				RunnerID: reg.ID, State: "interrupted", ExitCode: &code,
				Reason: "the runner lost track of it",
			})
			if rerr != nil && !errors.Is(rerr, registry.ErrConflict) {
				return nil, fmt.Errorf("handing back job %s: %w", lost, notRegistered(rerr))
			}
			j, err = c.Claim(ctx, reg.ID)
		}
	}
	if err != nil || j == nil {
		return nil, notRegistered(err)
	}
	return &Job{ID: j.ID, Command: j.Command}, nil
}

// heldBy returns the job the registry says runnerID is running, or "".
func (s registryService) heldBy(ctx context.Context, runnerID string) string {
	rs, err := s.c.Runners(ctx, "")
	if err != nil {
		return ""
	}
	for _, r := range rs {
		if r.ID == runnerID {
			return r.JobID
		}
	}
	return ""
}

func (s registryService) Report(ctx context.Context, reg Registration, job *Job, res Result) error {
	state := registry.JobState("succeeded")
	if res.ExitCode != 0 {
		state = "failed"
	}
	return s.report(ctx, reg, job, state, res)
}

func (s registryService) Requeue(ctx context.Context, reg Registration, job *Job, res Result) error {
	return s.report(ctx, reg, job, "interrupted", res)
}

func (s registryService) report(ctx context.Context, reg Registration, job *Job, state registry.JobState, res Result) error {
	code := res.ExitCode
	out := registry.Result{
		RunnerID: reg.ID,
		State:    state,
		ExitCode: &code,
		// Valid UTF-8, so that JSON does not inflate invalid bytes; and
		// never the runner's token, whatever the job printed.
		Output: reg.Token.redact(strings.ToValidUTF8(res.Output, "\uFFFD")),
		Reason: reg.Token.redact(res.Reason),
	}
	_, err := s.as(reg).Report(ctx, job.ID, out)
	if rejected(err) && out.Output != "" {
		// The service will never take this result as it is (an output
		// over its limit): the outcome matters more than the output.
		out.Output = ""
		out.Reason = strings.TrimSpace(out.Reason + " (output dropped: " + err.Error() + ")")
		_, err = s.as(reg).Report(ctx, job.ID, out)
	}
	switch {
	case errors.Is(err, registry.ErrConflict) || errors.Is(err, registry.ErrNotFound) || errors.Is(err, registry.ErrUnauthorized):
		return fmt.Errorf("job %s: %w (%v)", job.ID, ErrJobGone, err)
	case rejected(err):
		// Retrying the same request would be rejected for ever, and a
		// pending result keeps the runner from claiming.
		return fmt.Errorf("job %s: the CI service rejects the result: %w (%v)", job.ID, ErrJobGone, err)
	}
	return err
}

// rejected reports whether err is an answer that the same request will
// always get: 400 Bad Request or 413 Content Too Large.
func rejected(err error) bool {
	var ae *registry.APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusRequestEntityTooLarge)
}

package registry

import "time"

// The defaults of [Config]'s fields.
const (
	DefaultLease      = time.Minute
	DefaultMaxJobs    = 10000
	DefaultMaxRunners = 1000
	DefaultMaxCommand = 64 << 10
	DefaultMaxOutput  = 64 << 10
)

// Bounds on what a runner registers with: longer names, more labels or
// longer labels are refused with 400.
const (
	maxName   = 256
	maxLabels = 32
)

// Config holds a [Server]'s settings. A nil *Config means the defaults,
// and so does the zero value of each field.
type Config struct {
	// AdminToken is the secret that enqueueing a job, listing the jobs and
	// removing another runner's registration require, presented as
	// "Authorization: Bearer TOKEN"; it also registers runners and reads
	// any job. Empty: nobody can do those (403).
	AdminToken string

	// JoinToken is the secret that registering a runner requires, presented
	// as "Authorization: Bearer TOKEN": give it to the runners, and keep the
	// admin token for operators. The admin token registers too. Empty: only
	// the admin token does.
	JoinToken string

	// Lease is how long a runner stays registered without a request from
	// it (a claim, a heartbeat, a report). When it lapses the registry
	// removes the runner and re-queues its job, so that the job of a runner
	// gone for good (a spot instance replaced under another name) runs
	// again. A shorter lease re-queues such jobs sooner; a longer one
	// spares a runner that is cut off from the registry for a while (its
	// job is re-queued and may start elsewhere while it still runs). Zero
	// means DefaultLease.
	Lease time.Duration

	// MaxJobs bounds the jobs the registry holds. When it is reached,
	// enqueueing forgets the oldest finished job to make room, or fails
	// with 429 if every job is queued or running. Zero means
	// DefaultMaxJobs.
	MaxJobs int

	// MaxRunners bounds the registrations: registering beyond it fails
	// with 429. Zero means DefaultMaxRunners.
	MaxRunners int

	// MaxCommand bounds a job's command line, in bytes: a longer one is
	// refused with 413. Zero means DefaultMaxCommand.
	MaxCommand int

	// MaxOutput bounds the output a runner sends with a result, in bytes:
	// a longer one is refused with 413 (send its tail). Whatever is sent,
	// the registry keeps its last OutputLimit bytes. Zero means
	// DefaultMaxOutput.
	MaxOutput int
}

// withDefaults returns a copy of c with every zero field set to its
// default.
func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if out.Lease <= 0 {
		out.Lease = DefaultLease
	}
	def(&out.MaxJobs, DefaultMaxJobs)
	def(&out.MaxRunners, DefaultMaxRunners)
	def(&out.MaxCommand, DefaultMaxCommand)
	def(&out.MaxOutput, DefaultMaxOutput)
	return out
}

// bodyLimit bounds a request body: large enough for the longest command
// or output, even with every byte escaped in JSON (\u00XX), and at least
// 1 MiB.
func (c Config) bodyLimit() int64 {
	return int64(max(1<<20, 6*max(c.MaxCommand, c.MaxOutput)+64<<10))
}

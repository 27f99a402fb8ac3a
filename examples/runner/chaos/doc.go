// Package chaos is a seeded chaos test of the example runner and registry:
// it builds the real binaries and runs them on loopback, in temporary
// directories, and has no code outside its tests.
//
//	go test ./examples/runner/chaos -run Chaos -v                           # the CI set: seeds 1..20
//	go test ./examples/runner/chaos -run Chaos -v -chaos.n 1000 -timeout 0   # the full set
//	go test ./examples/runner/chaos -run Chaos -v -chaos.v -chaos.seed 17    # one schedule again, with its log
//
// # A schedule
//
// Each seed is one schedule: a registry (-lease 2s), two hosts, each with a
// fake IMDS (imds/imdstest) and a runner polling it every 50 ms, and 3 to 6
// jobs. Then, at random moments drawn from a math/rand/v2 source seeded by
// the seed, 6 to 13 of: a spot interruption, SIGTERM, SIGKILL, SIGHUP (or
// two in a row) to a runner; a registry restart (SIGTERM), crash (SIGKILL,
// then a start from its state file), outage (down for up to 2.8 s) or hang
// (SIGSTOP, then SIGCONT); more jobs. A runner that exits is replaced: under
// a new name on a new host, or, after a SIGKILL half the time and always
// when its state file holds a result it could not deliver (exit 3), under
// the same name with the same state file. Jobs sleep
// for up to 1.5 s; some ignore SIGTERM, some leave a process in the
// background (that ignores SIGTERM too). Once the faults are over every
// job is let finish, and every runner is stopped with SIGTERM.
//
// # The checks
//
// Jobs write their runs to a file, the ground truth: "start", "end", and
// "dup" when a run finds the job's lock (flock, which the kernel releases
// when the last process of the run holding it is gone) held by another.
// After each schedule:
//
//   - every job succeeded in the registry and ended in the ground truth
//     (else lost); a job that ended more than once is allowed only if the
//     runner of the earlier end was SIGKILLed after it (or SIGKILLed the job
//     while draining) and no runner logged its result as taken before the
//     next run started;
//   - no run of a job while another was alive (concurrent duplicates);
//   - no job started by a runner after its imminent notice: none logged as
//     started after the first line stamped "T+", and none in the ground
//     truth that the runner had not logged as started before it;
//   - no registration left 2×lease+3 s after the last runner exited;
//   - no process carrying the schedule's marker (CHAOS_MARK, passed to jobs
//     with -job-env) left 5 s after;
//   - every drain that was not SIGKILLed ended (exit 0 or 3) by the
//     deadline the runner's timeline states, tightened by later notices.
//
// A failing seed is printed with the schedule's faults, the ground truth
// and the output of every process.
package chaos

// Package termsig tells a program, as early as possible, that the machine or
// process it runs on is about to go away, so that it can finish or hand back
// its work and clean up before it is killed.
//
// Every origin of a termination notice is a [Source]: POSIX signals, the
// ACPI power button, systemd-logind, the AWS, GCE and Azure metadata
// services (packages signal, acpi, logind, imds, gcemeta, azure). A [Notifier] runs sources and merges their notices into one
// channel of [Notice] values that say what is happening ([Kind]), which
// event it is ([Notice.Event]), where it came from and by when
// ([Notice.Deadline]). Package sources picks the sources that apply on the
// current host; package termsigtest has a fake source for unit tests. A
// [Notice] round-trips through encoding/json and logs as a group with
// log/slog.
//
// # Using a Notifier
//
//	n := termsig.New(sources.Detect(sources.Config{})...)
//	defer n.Stop()
//	for nt := range n.C() {
//		if nt.Kind.Imminent() {
//			ctx, cancel := nt.DrainContext(context.Background(), time.Second, 30*time.Second)
//			drain(ctx) // ends 1 s before the deadline
//			cancel()
//			n.Release(context.Background(), nt) // done: the platform need not wait
//			return
//		}
//		advise(nt) // Reload, Rebalance, Maintenance, Cleared
//	}
//
// # Using a context
//
// [NotifyContext]'s context ends at the first imminent notice, which
// [Cause] returns; [Notice.DrainContext] gives the time left to clean up:
//
//	ctx, stop := termsig.NotifyContext(context.Background(), signal.New())
//	defer stop()
//	work(ctx)
//	if nt, ok := termsig.Cause(ctx); ok {
//		dctx, cancel := nt.DrainContext(ctx, 5*time.Second, 30*time.Second)
//		defer cancel()
//		handBack(dctx)
//	}
//
// The sources keep running until stop is called: a second signal during
// the drain is logged, not the end of the process.
//
// # Guarantees
//
//   - A notice that a source sends is never dropped by the Notifier while
//     it runs: when the consumer is slow, sources wait.
//   - [New] returns once the local sources are set up (signal handlers
//     installed, power-button subscriptions open), waiting at most
//     [Config.ReadyTimeout] and never for the network: a SIGTERM a moment
//     after start is a notice, not death with status 143.
//     [Notifier.Ready] says when every source, metadata services included,
//     has had its first look.
//   - [Notifier.Stop] cancels the sources and returns once they have all
//     returned; after that no notice is sent, no goroutine of termsig runs
//     and C is closed. [Notifier.Shutdown] does the same but gives up when
//     its context ends, naming the sources that still run; the stop
//     function of NotifyContext waits at most [Config.StopTimeout].
//   - A source that does not apply to the host returns [ErrUnavailable]
//     and retires quietly. A source that fails, or panics, is marked failed
//     and does not disturb the others. A nil source, typed or not,
//     and two sources of one name are a panic in New.
//   - Failures are visible by default: a nil [Config.Logger] logs to
//     slog.Default(). Each change of a source's health is logged once, by
//     the Notifier; when the last source that can deliver a platform
//     notice ends, the Notifier logs it at level Error. [Notifier.Status]
//     shows each source's state, last error and when it was last heard
//     from.
//
// # Writing a source
//
// A source is Name and Watch, which talks back through a [Run]. The
// contract is on [Source]; termsigtest.TestSource checks it.
package termsig

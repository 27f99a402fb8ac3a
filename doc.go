// Package termsig tells a program, as early as possible, that the machine or
// process it runs on is about to go away, so that it can finish or hand back
// its work and clean up before it is killed.
//
// Every origin of a termination notice is a [Source]: POSIX signals
// (package signal), the ACPI power button (package acpi), systemd-logind
// (package logind), the AWS instance metadata service (package imds), the
// GCE metadata server (package gcemeta), Azure's scheduled events (package
// azure). A [Notifier] runs sources and merges their notices into one
// channel of [Notice] values that say what is happening ([Kind]), which
// event it is ([Notice.Event]), where it came from and by when
// ([Notice.Deadline]). Package sources picks the sources that apply on the
// current host; package termsigtest has a fake source for unit tests.
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
// [NotifyContext] returns a context that is cancelled at the first imminent
// notice; [Cause] returns that notice, and [Notice.DrainContext] gives the
// time left to clean up:
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
// The sources keep running until stop is called, so a second signal during
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
//     and retires quietly (when no platform source applies at all, one
//     line at level Info says so). A source that fails, or panics, is marked
//     failed and does not disturb the others. A nil source, typed or not,
//     and two sources of one name are a panic in New.
//   - Failures are visible by default: a nil [Config.Logger] logs to
//     slog.Default(). Each change of a source's health is logged once, by
//     the Notifier; when the last source that can deliver a platform
//     notice ends, the Notifier logs it at level Error. [Notifier.Status]
//     shows each source's state, last error and when it was last heard
//     from.
//   - A [Notice] round-trips through encoding/json and logs as a group
//     with log/slog.
//
// # Writing a source
//
// A source is two methods: Name, and Watch, which talks back through a
// [Run]: Send a notice, say Ready after the first look, Report health.
// The whole contract is on [Source]; [termsigtest.TestSource] checks it.
// A source that sends one Terminate when a channel is closed:
//
//	type Flag struct{ C <-chan struct{} }
//
//	func (f Flag) Name() string { return "flag" }
//
//	func (f Flag) Watch(ctx context.Context, r *termsig.Run) error {
//		r.Ready() // its first look: nothing to set up
//		select {
//		case <-f.C:
//			err := r.Send(ctx, termsig.Notice{Kind: termsig.Terminate, Event: "flag", Reason: "flag closed"})
//			if err != nil {
//				return err
//			}
//		case <-ctx.Done():
//			return ctx.Err()
//		}
//		<-ctx.Done()
//		return ctx.Err()
//	}
//
// [termsigtest.TestSource]: https://pkg.go.dev/github.com/termsig/termsig/termsigtest#TestSource
package termsig

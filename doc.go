// Package termsig tells a program, as early as possible, that the machine or
// process it runs on is about to go away, so that it can finish or hand back
// its work and clean up before it is killed.
//
// Every origin of a termination notice is a [Source], and each has a
// package:
//
//   - signal: SIGTERM, SIGINT and SIGHUP;
//   - acpi: the ACPI power button (Linux);
//   - logind: systemd-logind's shutdown, held with a delay lock (Linux);
//   - imds: the AWS EC2 metadata service (spot interruptions, rebalance);
//   - gcemeta: the GCE metadata server (preemption, host maintenance);
//   - azure: Azure's Scheduled Events (eviction, reboot, freeze);
//   - alibaba, tencent: Alibaba Cloud and Tencent Cloud spot reclaims.
//
// A [Notifier] runs sources and merges their notices into one channel of
// [Notice] values that say what is happening ([Kind]), which event it is
// ([Notice.Event]), where it came from and by when ([Notice.Deadline]).
// Package sources picks the sources that apply on this host; package
// termsigtest has a fake source for unit tests. A Notice round-trips
// through encoding/json and logs as a group with log/slog.
//
// # Using a Notifier
//
//	n := termsig.New(sources.Detect(sources.Config{})...)
//	defer n.Stop()
//	for nt := range n.C() {
//		if nt.Kind.Imminent() {
//			ctx, cancel := nt.DrainContext(context.Background(), termsig.Drain{Margin: time.Second})
//			defer cancel()
//			drain(ctx) // ends 1 s before the deadline
//			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
//			defer rcancel()
//			n.Release(rctx, nt) // done: the platform need not wait
//			return
//		}
//		advise(nt) // Reload, Rebalance, Maintenance, Cleared
//	}
//
// # Using a context
//
// [NotifyContext]'s context ends at the first imminent notice, which
// [Cause] returns; [Notice.DrainContext] gives the time left to clean up.
// The sources keep running until stop: a second signal during the drain
// is logged, not the end of the process.
//
//	ctx, stop := termsig.NotifyContext(context.Background(), signal.New())
//	defer stop()
//	work(ctx)
//	if nt, ok := termsig.Cause(ctx); ok {
//		dctx, cancel := nt.DrainContext(ctx, termsig.Drain{Margin: 5 * time.Second})
//		defer cancel()
//		handBack(dctx)
//	}
//
// # Guarantees
//
//   - While it runs, the Notifier drops no notice: slow consumers make
//     sources wait.
//   - [New] returns once the local sources are set up (signal handlers,
//     power-button subscriptions), waiting at most [Config.ReadyTimeout]
//     and never for the network; [Notifier.Ready] says when every source
//     has had its first look.
//   - After [Notifier.Stop] no notice is sent, no goroutine of termsig
//     runs and C is closed; [Notifier.Shutdown] bounds the wait.
//   - A source that does not apply here returns [ErrUnavailable] and
//     retires quietly; one that fails or panics is marked failed alone.
//   - Each change of a source's health is logged once, to slog.Default()
//     unless [Config.Logger] says otherwise; [Notifier.Status] shows it.
//
// # Writing a source
//
// A source is Name and Watch, which talks back through a [Run]. The
// contract is on [Source]; termsigtest.TestSource checks it.
package termsig

// Package termsig tells a program, as early as possible, that the machine or
// process it runs on is about to go away, so that it can finish or hand back
// its work and clean up before it is killed.
//
// Every origin of a termination notice is a [Source]: POSIX signals
// (package signal), the ACPI power button (package acpi), the AWS instance
// metadata service (package imds), the GCE metadata server (package
// gcemeta). A [Notifier] runs sources and merges their notices into one
// channel of [Notice] values that say what is happening ([Kind]), where it
// came from and by when ([Notice.Deadline]). Package sources picks the
// sources that apply on the current host.
//
// # Using a Notifier
//
//	n := termsig.New(sources.Detect(sources.Config{})...)
//	defer n.Stop()
//	for nt := range n.C() {
//		if nt.Kind.Imminent() {
//			drain(nt.Deadline)
//			return
//		}
//		advise(nt) // Reload, Rebalance, Maintenance, Cleared
//	}
//
// # Using a context
//
// [NotifyContext] returns a context that is cancelled at the first imminent
// notice; [Cause] returns that notice:
//
//	ctx, stop := termsig.NotifyContext(context.Background(), signal.New())
//	defer stop()
//	<-ctx.Done()
//	if nt, ok := termsig.Cause(ctx); ok {
//		log.Printf("leaving: %v", nt)
//	}
//
// # Guarantees
//
// A notice that a source sends is never dropped by the Notifier while it
// runs: when the consumer is slow, sources wait. [Notifier.Stop] cancels the
// sources and returns once they have all returned; after that no notice is
// sent and no goroutine of termsig runs. A source that does not apply to the
// host returns [ErrUnavailable] and retires quietly; a source that fails
// does not disturb the others. [Notifier.Status] shows each source's state.
//
// # Writing a source
//
// See the contract on [Source]. A source that retries transient failures
// calls [ReportError] so that they show in [Notifier.Status].
package termsig

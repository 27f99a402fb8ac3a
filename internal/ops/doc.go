// Package ops serves what an operator's monitoring asks of a long-running
// termsig program: Prometheus metrics and health probes, on the addresses
// of --metrics-bind-address and --health-probe-bind-address
// (controller-runtime's flag names; each off unless set, one listener when
// both are equal; [Config.RegisterFlags] defines them). A nil *[Server]
// does nothing, so code that counts need not ask whether metrics are on.
//
// # Metrics
//
// /metrics serves a registry of the Server's own (not the global one):
//
//   - termsig_notices_total{source,kind,event}: notices the program took
//     from the Notifier's C ([Server.Noticed]); each source keeps the first
//     [MaxEventsPerSource] event values, later ones count as "other";
//   - termsig_source_state{source,state}: 1 for each source's state
//     (running, unavailable, failed, stopped), 0 for the others, read from
//     Notifier.Status at each scrape;
//   - termsig_source_last_heard_timestamp_seconds{source}: when the source
//     last heard from its origin; absent until it has;
//   - termsig_notice_action_seconds: histogram of the time from a notice's
//     Observed to the program's first action on it ([Server.Acted]);
//   - the Go and process collectors (go_*, process_*), and promhttp's own;
//   - the program's own, named after it, on [Server.Registerer].
//
// # Probes
//
// /healthz answers 200 while the program's main loop turns: the loop calls
// [Server.Tick] on each turn, and selects on [Server.Heartbeat] so that it
// turns at least every third of [Config.Staleness] when nothing else
// happens. When the last Tick is older than Staleness, /healthz answers
// 500 and says since when.
//
// /readyz answers 200 once the Notifier given to [Server.Watch] is Ready
// and every check added with [Server.AddReadyCheck] passes, else 503. Both
// bodies name each check on a line of its own, as Kubernetes' verbose
// probes do ("[+]notifier ok", "[-]node failed: no node read yet"), then
// the verdict ("readyz check failed").
//
// # Webhook
//
// With --webhook-url (or --webhook-url-file), each imminent notice the
// program takes, a held one once, and the outcomes it reports
// ([Server.Outcome]) are posted as package internal/webhook says: never
// delaying the program, tried again until the notice's deadline, counted
// in termsig_webhook_sends_total{result}.
package ops

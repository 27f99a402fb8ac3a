package termsig

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// A Kind says what is about to happen to the host or the process.
//
// The zero Kind is not a valid kind: it prints as "kind(0)" and is not
// [Kind.Imminent].
type Kind uint8

// The kinds of notice. Terminate, Stop, Hibernate, Reboot and Interrupt are
// imminent: the host or the process is going away. The others are advice, or
// a request to restart in place.
const (
	// Terminate: the host or the process is about to end for good
	// (a spot interruption, a preemption, SIGTERM, a power-button press).
	Terminate Kind = iota + 1
	// Stop: the host is about to be stopped; its disks survive.
	Stop
	// Hibernate: the host is about to be hibernated; its memory is saved to disk.
	Hibernate
	// Reboot: the host is about to reboot.
	Reboot
	// Interrupt: an operator asked the process to stop now (SIGINT, Ctrl-C).
	Interrupt
	// Reload: finish the current work, then restart in place (SIGHUP).
	// It is not imminent: the process is expected to come back.
	Reload
	// Rebalance: the host is at elevated risk of interruption; move work
	// away if that is cheap. No deadline is implied.
	Rebalance
	// Maintenance: maintenance is scheduled or under way; the Deadline, if
	// known, is when it may start.
	Maintenance
	// Cleared: an earlier notice from the same source and Event no longer
	// holds: advice withdrawn (a maintenance event canceled or completed),
	// or a platform's announced event called off (a shutdown canceled, a
	// scheduled event or a termination time that left the metadata).
	Cleared
)

var kindNames = [...]string{
	Terminate:   "terminate",
	Stop:        "stop",
	Hibernate:   "hibernate",
	Reboot:      "reboot",
	Interrupt:   "interrupt",
	Reload:      "reload",
	Rebalance:   "rebalance",
	Maintenance: "maintenance",
	Cleared:     "cleared",
}

// String returns the kind as a lower-case word, such as "terminate".
func (k Kind) String() string {
	if k.valid() {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

func (k Kind) valid() bool { return k >= Terminate && int(k) < len(kindNames) }

// Imminent reports whether k means that the host or the process is going
// away: true for Terminate, Stop, Hibernate, Reboot and Interrupt; false for
// Reload, Rebalance, Maintenance, Cleared and invalid kinds.
func (k Kind) Imminent() bool { return k >= Terminate && k <= Interrupt }

// MarshalText returns the word that [Kind.String] returns. It fails for an
// invalid kind, so that an invalid kind never passes for a valid one in JSON.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.valid() {
		return nil, fmt.Errorf("termsig: invalid kind %d", uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText sets k from a word that [Kind.String] returns, in any case.
func (k *Kind) UnmarshalText(text []byte) error {
	v, err := ParseKind(string(text))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// ParseKind returns the kind named by s, in any case ("terminate", "Reload").
func ParseKind(s string) (Kind, error) {
	for k := Terminate; k.valid(); k++ {
		if strings.EqualFold(s, kindNames[k]) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("termsig: unknown kind %q", s)
}

// A Notice says that the host or the process is about to go away, or gives
// advice about it. Sources fill it; the [Notifier] fills Source and Observed
// when a source leaves them empty.
type Notice struct {
	// Source is the name of the source that saw the notice, such as
	// "signal" or "imds".
	Source string
	// Kind says what is happening.
	Kind Kind
	// Event is a stable identity of the event the notice is about,
	// unique within its source, such as "spot/instance-action",
	// "scheduled/instance-event-1234" or "SIGTERM". A Cleared notice
	// carries the Event of the advice it clears, so that a consumer can
	// keep one reason per (Source, Event). It may be empty for a source
	// that does not set it.
	Event string
	// Reason is a short human description, such as "spot interruption:
	// terminate" or "SIGTERM".
	Reason string
	// Deadline is when the host goes away or the event starts. The zero
	// time means unknown.
	Deadline time.Time
	// Observed is when this process saw the notice.
	Observed time.Time
	// Held says that the platform holds the host for the consumer, as an
	// Auto Scaling termination hook does: the host goes at Deadline
	// unless the hold is extended, which the source does on its own while
	// the notice is not released, each time sending a later notice for the
	// same Event with the later Deadline, up to HoldLimit; [Notifier.Release]
	// ends the hold, and the host goes then. A notice that is not Held is
	// hard: nothing the consumer does moves its Deadline (a spot
	// interruption's two minutes, a SIGTERM). A later notice for the same
	// Event that is not Held says the hold is over: go by its Deadline.
	Held bool
	// HoldLimit is, on a Held notice, the latest Deadline the hold can
	// reach (the platform's limit, or the source's own); zero when the
	// notice is not Held.
	HoldLimit time.Time
	// Signal is the signal that caused the notice, or nil.
	Signal os.Signal
	// Raw is the payload as received (a response body, an acpid line), for
	// audit. It may be empty.
	Raw string
}

// String returns the notice as one readable line, such as
//
//	imds: terminate (spot interruption: terminate), deadline 2026-11-30T10:02:00Z (in 1m59s)
//
// The time left is measured from Observed.
func (n Notice) String() string {
	var b strings.Builder
	src := n.Source
	if src == "" {
		src = "unknown"
	}
	b.WriteString(src)
	b.WriteString(": ")
	b.WriteString(n.Kind.String())
	if n.Reason != "" {
		b.WriteString(" (")
		b.WriteString(n.Reason)
		b.WriteString(")")
	}
	if !n.Deadline.IsZero() {
		b.WriteString(", deadline ")
		b.WriteString(n.Deadline.UTC().Format(time.RFC3339))
		if !n.Observed.IsZero() {
			left := n.Deadline.Sub(n.Observed).Round(time.Millisecond)
			if left >= 0 {
				fmt.Fprintf(&b, " (in %v)", left)
			} else {
				fmt.Fprintf(&b, " (%v ago)", -left)
			}
		}
	}
	if n.Held {
		b.WriteString(", held")
		if !n.HoldLimit.IsZero() {
			b.WriteString(" up to ")
			b.WriteString(n.HoldLimit.UTC().Format(time.RFC3339))
		}
	}
	return b.String()
}

// LogValue makes a Notice log as a group of its fields (source, kind,
// event, reason, deadline, observed, held, hold_limit, signal), leaving out
// empty ones and Raw, which may be large.
func (n Notice) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 9)
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	add("source", n.Source)
	if n.Kind != 0 {
		add("kind", n.Kind.String())
	}
	add("event", n.Event)
	add("reason", n.Reason)
	if !n.Deadline.IsZero() {
		attrs = append(attrs, slog.Time("deadline", n.Deadline))
	}
	if !n.Observed.IsZero() {
		attrs = append(attrs, slog.Time("observed", n.Observed))
	}
	if n.Held {
		attrs = append(attrs, slog.Bool("held", true))
	}
	if !n.HoldLimit.IsZero() {
		attrs = append(attrs, slog.Time("hold_limit", n.HoldLimit))
	}
	if n.Signal != nil {
		add("signal", SignalName(n.Signal))
	}
	return slog.GroupValue(attrs...)
}

// noticeJSON is the JSON form of a Notice.
type noticeJSON struct {
	Source    string    `json:"source,omitempty"`
	Kind      Kind      `json:"kind,omitzero"`
	Event     string    `json:"event,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Deadline  time.Time `json:"deadline,omitzero"`
	Observed  time.Time `json:"observed,omitzero"`
	Held      bool      `json:"held,omitempty"`
	HoldLimit time.Time `json:"hold_limit,omitzero"`
	Signal    string    `json:"signal,omitempty"`
	Raw       string    `json:"raw,omitempty"`
}

// MarshalJSON encodes n as an object with lower-case keys: Kind as its word
// ("terminate"), Signal as its name ("SIGTERM", see [SignalName]), times in
// RFC 3339 with nanoseconds, in UTC. Empty fields are left out. It fails
// for an invalid Kind and for a Signal that is not a system signal
// (syscall.Signal), since neither could be decoded again.
func (n Notice) MarshalJSON() ([]byte, error) {
	j := noticeJSON{
		Source:    n.Source,
		Kind:      n.Kind,
		Event:     n.Event,
		Reason:    n.Reason,
		Deadline:  n.Deadline.UTC(),
		Observed:  n.Observed.UTC(),
		Held:      n.Held,
		HoldLimit: n.HoldLimit.UTC(),
		Raw:       n.Raw,
	}
	if n.Signal != nil {
		if !isSysSignal(n.Signal) {
			return nil, fmt.Errorf("termsig: signal %q is not a system signal and cannot be decoded again", n.Signal.String())
		}
		j.Signal = SignalName(n.Signal)
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what [Notice.MarshalJSON] encodes, so that a
// round trip gives an equal Notice: the same fields, with times that are
// the same instants (time.Time.Equal; they come back in UTC, without a
// monotonic clock reading, so == holds only for UTC times without one). A
// kind or a signal name it does not know is an error; JSON null leaves n
// as it is.
func (n *Notice) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var j noticeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var sig os.Signal
	if j.Signal != "" {
		s, ok := signalByName(j.Signal)
		if !ok {
			return fmt.Errorf("termsig: unknown signal %q", j.Signal)
		}
		sig = s
	}
	utc := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return t.UTC()
	}
	*n = Notice{
		Source:    j.Source,
		Kind:      j.Kind,
		Event:     j.Event,
		Reason:    j.Reason,
		Deadline:  utc(j.Deadline),
		Observed:  utc(j.Observed),
		Held:      j.Held,
		HoldLimit: utc(j.HoldLimit),
		Signal:    sig,
		Raw:       j.Raw,
	}
	return nil
}

// A Drain says when the context of [Notice.DrainContext] ends. The zero
// Drain ends it at the notice's Deadline or, for a notice without one,
// [DefaultDrainFallback] after the notice was seen.
type Drain struct {
	// Margin is the time kept in hand before the notice's Deadline, to
	// exit, flush logs, or let the platform's own stop begin: the context
	// ends Margin before the Deadline. Zero ends it at the Deadline; a
	// negative Margin counts as zero. It does not apply to Fallback.
	Margin time.Duration

	// Fallback is how long the drain lasts, from the notice's Observed
	// time, when the notice has no Deadline (a signal, a power-button
	// press). Values below 1 mean DefaultDrainFallback (10 s).
	Fallback time.Duration
}

// DrainContext returns a context for the work of leaving after n: cleaning
// up, handing work back, unregistering. It keeps parent's values but not
// its cancellation (parent is typically the context that n cancelled), and
// it ends d.Margin before n.Deadline or, when the Deadline is unknown,
// d.Fallback after n.Observed (after now, if Observed is zero too). Once
// it ends, its cause is an error that wraps context.DeadlineExceeded and
// names n, so that [Cause] of it returns n.
//
// When the time left before n.Deadline, at the call, is no more than
// d.Margin (a Deadline already past included), there is no time to
// drain: the context is already done when DrainContext returns, with Err
// context.DeadlineExceeded and a Deadline (n.Deadline minus d.Margin) not
// after now. A caller tells by checking Err at once; to spend what time
// is left instead, it calls again with a smaller Margin.
//
// The Deadline is what the platform said, and nothing here bounds it: a
// broken or hostile server can name year 9999, and the context then never
// ends. To bound the drain whatever it says, cap the Deadline first:
//
//	if limit := nt.Observed.Add(15 * time.Minute); nt.Deadline.After(limit) {
//		nt.Deadline = limit
//	}
//
// For a [Notice.Held] notice the Deadline is the hold's end as it stands
// at n: a later notice for the same Event moves it, and a drain that
// should use the hold takes a new context from that one.
//
// Call cancel when the drain is over, as for context.WithDeadline.
func (n Notice) DrainContext(parent context.Context, d Drain) (context.Context, context.CancelFunc) {
	var end time.Time
	if !n.Deadline.IsZero() {
		end = n.Deadline.Add(-max(d.Margin, 0))
	} else {
		start := n.Observed
		if start.IsZero() {
			start = time.Now()
		}
		fallback := d.Fallback
		if fallback < 1 {
			fallback = DefaultDrainFallback
		}
		end = start.Add(fallback)
	}
	dctx := context.WithValue(context.WithoutCancel(parent), drainKey{}, n)
	return context.WithDeadlineCause(dctx, end, &drainError{n})
}

// drainKey is the key of the Notice that a DrainContext drains for.
type drainKey struct{}

// drainError is the cause of a drain context that ran out of time.
type drainError struct{ n Notice }

func (e *drainError) Error() string { return "termsig: time to drain is up: " + e.n.String() }

func (e *drainError) Unwrap() []error {
	return []error{context.DeadlineExceeded, &noticeError{e.n}}
}

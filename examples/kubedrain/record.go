package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/termsig/termsig"
)

// The names kubedrain owns on a Node.
const (
	// TaintKey is the taint kubedrain puts on a node it cordons, with the
	// kind of the strongest notice as its value, such as
	// termsig.dev/terminating=terminate:NoSchedule. Pods that should stay
	// (or land) on a node that is going away tolerate it.
	TaintKey = "termsig.dev/terminating"

	// ExcludeLabel, set to ExcludeValue, asks the service controller (and
	// the load balancers that honour it, such as MetalLB) to take the
	// node out of external load balancers' backends. kubedrain sets it
	// while it drains the node (see record.excludes).
	ExcludeLabel = corev1.LabelNodeExcludeBalancers
	ExcludeValue = "true"

	// AnnotationKey holds kubedrain's record of what it did to the node
	// and why (see record), so that a restarted kubedrain knows whether the
	// cordon is its own to undo.
	AnnotationKey = "termsig.dev/kubedrain"

	// maxRecordBytes bounds the annotation kubedrain reads: it is written
	// by kubedrain, but anyone who may patch the node can change it.
	maxRecordBytes = 16 << 10
	// maxReasons bounds the reasons in a record. Each is one event of one
	// source; a host has a handful at most.
	maxReasons = 32
)

// A record is what kubedrain keeps in the node's annotation: the notices
// it holds the node cordoned for, and whether the cordon is its own. It
// is the only state that outlives a kubedrain process.
type record struct {
	// Cordoned is true when kubedrain set spec.unschedulable: the node was
	// schedulable when the first reason came. A node that an operator had
	// cordoned is never uncordoned by kubedrain.
	Cordoned bool `json:"cordoned"`
	// Reasons are the notices that hold, one per (Source, Event).
	Reasons []reason `json:"reasons"`
	// BootID is the node's boot ID when the last imminent reason came. A
	// node that comes back with another (a stopped or rebooted machine,
	// started again) has been through what the reason announced.
	BootID string `json:"bootID,omitempty"`
	// Excluded is true when kubedrain set the node's label ExcludeLabel
	// (the node did not have it): kubedrain removes it once no reason to
	// drain holds. A label that was there before, or that someone changed
	// since, is never removed by kubedrain.
	Excluded bool `json:"excludedFromLoadBalancers,omitempty"`
}

// A reason is one notice that kubedrain acts on.
type reason struct {
	Source   string       `json:"source"`
	Event    string       `json:"event,omitempty"`
	Kind     termsig.Kind `json:"kind"`
	Deadline time.Time    `json:"deadline,omitzero"`
	// Held is true for a termination the platform holds until kubedrain
	// releases it (termsig.Notice.Held); Deadline is then the end of the
	// hold that the drain goes by (see controller.holdEnd).
	Held bool `json:"held,omitempty"`
	// Drain is true when the notice asked for evictions, not only a
	// cordon.
	Drain bool `json:"drain,omitempty"`
	// Lifted is true when an operator uncordoned the node while the
	// reason held: it no longer cordons or taints the node. A new reason,
	// or new news of this one (another kind or deadline), cordons again.
	Lifted bool `json:"lifted,omitempty"`
}

func reasonOf(nt termsig.Notice, drain bool) reason {
	return reason{Source: nt.Source, Event: nt.Event, Kind: nt.Kind, Deadline: nt.Deadline, Held: nt.Held, Drain: drain}
}

func (r reason) same(source, event string) bool { return r.Source == source && r.Event == event }

func (r reason) String() string {
	if r.Event == "" {
		return r.Source + ": " + r.Kind.String()
	}
	return r.Source + " " + r.Event + ": " + r.Kind.String()
}

// errBadRecord says that the node's annotation is not a record kubedrain
// wrote.
var errBadRecord = errors.New("not a kubedrain record")

// readRecord returns the record in node's annotation; a node without one
// has the zero record. An annotation that is not a valid record gives the
// zero record and an error wrapping errBadRecord: the caller logs it, and
// the record it writes next replaces it. Since the zero record says that
// the cordon is not kubedrain's, a damaged annotation can only make
// kubedrain leave a cordon in place, never lift one it did not set.
func readRecord(node *corev1.Node) (record, error) {
	s, ok := node.Annotations[AnnotationKey]
	if !ok {
		return record{}, nil
	}
	if len(s) > maxRecordBytes {
		return record{}, fmt.Errorf("annotation %s: %w: %d bytes", AnnotationKey, errBadRecord, len(s))
	}
	var rec record
	if err := json.Unmarshal([]byte(s), &rec); err != nil {
		return record{}, fmt.Errorf("annotation %s: %w: %v", AnnotationKey, errBadRecord, err)
	}
	if len(rec.Reasons) > maxReasons {
		return record{}, fmt.Errorf("annotation %s: %w: %d reasons", AnnotationKey, errBadRecord, len(rec.Reasons))
	}
	for _, r := range rec.Reasons {
		if r.Source == "" || r.Kind == 0 || r.Kind == termsig.Cleared {
			return record{}, fmt.Errorf("annotation %s: %w: reason %+v", AnnotationKey, errBadRecord, r)
		}
	}
	return rec, nil
}

// add puts r in the record, in place of the reason for the same event.
// It reports whether the record changed.
func (rec *record) add(r reason) bool {
	i := slices.IndexFunc(rec.Reasons, func(o reason) bool { return o.same(r.Source, r.Event) })
	if i < 0 {
		if len(rec.Reasons) >= maxReasons {
			// Make room: the oldest advice goes, else the oldest reason.
			j := max(slices.IndexFunc(rec.Reasons, func(o reason) bool { return !o.Kind.Imminent() }), 0)
			if !r.Kind.Imminent() && rec.Reasons[j].Kind.Imminent() {
				return false // advice never pushes out an imminent notice
			}
			rec.Reasons = slices.Delete(rec.Reasons, j, j+1)
		}
		rec.Reasons = append(rec.Reasons, r)
		return true
	}
	old := rec.Reasons[i]
	if !r.Kind.Imminent() && old.Kind.Imminent() {
		// Advice does not weaken an imminent notice for the same event.
		return false
	}
	r.Drain = r.Drain || old.Drain
	if old.Kind == r.Kind && old.Deadline.Equal(r.Deadline) && old.Held == r.Held && old.Drain == r.Drain {
		return false
	}
	rec.Reasons[i] = r
	return true
}

// has reports whether the record has a reason for (source, event).
func (rec *record) has(source, event string) bool {
	return slices.ContainsFunc(rec.Reasons, func(r reason) bool { return r.same(source, event) })
}

// holds reports whether a reason in the record holds the node cordoned:
// one that an operator has not lifted.
func (rec *record) holds() bool {
	return slices.ContainsFunc(rec.Reasons, func(r reason) bool { return !r.Lifted })
}

// excludes reports whether the node is to be out of external load
// balancers: a reason that drains it holds (an imminent notice, or advice
// that --on-rebalance or --on-maintenance drains for), and an operator
// has not lifted it. Its pods are being evicted and the machine is going:
// traffic sent to it now is cut when it goes. Cordon-only advice keeps
// the node in: its pods still serve.
func (rec *record) excludes() bool {
	return slices.ContainsFunc(rec.Reasons, func(r reason) bool { return r.Drain && !r.Lifted })
}

// lift marks every reason lifted: an operator uncordoned the node while
// they held (see reason.Lifted). The cordon is no longer kubedrain's.
func (rec *record) lift() {
	for i := range rec.Reasons {
		rec.Reasons[i].Lifted = true
	}
	rec.Cordoned = false
}

// clear removes the advice for (source, event). An imminent reason stays:
// the machine is going away whatever the advice does. It reports whether
// the record changed.
func (rec *record) clear(source, event string) bool {
	n := len(rec.Reasons)
	rec.Reasons = slices.DeleteFunc(rec.Reasons, func(r reason) bool {
		return r.same(source, event) && !r.Kind.Imminent()
	})
	return len(rec.Reasons) != n
}

// strongest returns the kind the taint shows: of the reasons that are
// not lifted, the first imminent kind (in the order of termsig's kinds,
// Terminate first), else Maintenance before Rebalance. It is 0 when no
// reason holds.
func (rec *record) strongest() termsig.Kind {
	var best termsig.Kind
	for _, r := range rec.Reasons {
		if r.Lifted {
			continue
		}
		if best == 0 || rank(r.Kind) < rank(best) {
			best = r.Kind
		}
	}
	return best
}

func rank(k termsig.Kind) int {
	switch {
	case k.Imminent():
		return int(k)
	case k == termsig.Maintenance:
		return 100
	default:
		return 101
	}
}

func (rec *record) String() string {
	s := make([]string, len(rec.Reasons))
	for i, r := range rec.Reasons {
		s[i] = r.String()
	}
	return strings.Join(s, "; ")
}

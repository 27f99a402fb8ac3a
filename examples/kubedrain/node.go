package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// A kube is kubedrain's hold on its node: the cordon, the taint, the
// record and the Events. Its methods are safe for concurrent use, as
// client-go's clients are.
type kube struct {
	client kubernetes.Interface
	node   string
	// instance names this kubedrain in Events (its pod, or the host).
	instance string
	dryRun   bool
	log      *slog.Logger
	// m counts the node's changes and the evictions; nil counts nothing.
	m *metrics
	// read is the readiness of kubedrain's first read of the node.
	read nodeRead
}

// An update is what kube.update did.
type update struct {
	rec        record // the record as written
	cordoned   bool   // kubedrain set spec.unschedulable just now
	tainted    bool   // kubedrain set its taint, or changed its value, just now
	uncordoned bool   // kubedrain lifted its own cordon just now
	untainted  bool   // kubedrain removed its taint just now
	lifted     bool   // an operator had uncordoned the node under kubedrain's reasons
	wrote      bool   // the node was patched (or would be, in a dry run)
	excluded   bool   // kubedrain set ExcludeLabel just now
	included   bool   // kubedrain removed its ExcludeLabel just now
	// foreign is ExcludeLabel=value when the node is to be excluded from
	// now on but already has the label, set by someone else: kubedrain
	// leaves it, and will not remove it.
	foreign string
}

// fieldManager names kubedrain's writes in the node's managedFields.
const fieldManager = "termsig-kubedrain"

// update reads the node, lets change edit kubedrain's record of it, and
// patches the node's cordon, taint and annotation to match the record.
// The patch carries the resourceVersion that was read, so a write made
// in between (an operator's cordon, the kubelet's status) makes it fail
// with a conflict; update then starts again from a fresh read. change
// may run more than once and must depend only on the record and the
// node it is given.
func (k *kube) update(ctx context.Context, change func(*record, *corev1.Node)) (update, error) {
	var up update
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := k.client.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{})
		k.read.got(err)
		if err != nil {
			return err
		}
		rec, err := readRecord(node)
		if err != nil {
			k.log.Warn("kubedrain: replacing the node's annotation", "err", err)
		}
		excluding := rec.excludes()
		// A record that holds only ever lands together with a cordon: a
		// schedulable node with one was uncordoned by someone since.
		lifted := rec.holds() && !node.Spec.Unschedulable
		if lifted {
			// Someone uncordoned the node under kubedrain's reasons: theirs
			// is the last word on them (see reason.Lifted).
			rec.lift()
		}
		change(&rec, node)
		ours := rec.Cordoned && ownsCordon(node)
		value, labelled := node.Labels[ExcludeLabel]
		ourLabel := rec.Excluded && labelled && value == ExcludeValue
		patch, err := nodePatch(node, &rec)
		up = update{rec: rec, lifted: lifted}
		if !excluding && rec.excludes() && labelled && !rec.Excluded {
			up.foreign = ExcludeLabel + "=" + value
		}
		if err != nil || patch == nil {
			return err
		}
		up.wrote = true
		up.excluded = rec.Excluded && !labelled
		up.included = ourLabel && !rec.Excluded
		up.cordoned = !node.Spec.Unschedulable && rec.holds()
		up.uncordoned = node.Spec.Unschedulable && !rec.holds() && ours
		up.untainted = !rec.holds() && slices.ContainsFunc(node.Spec.Taints, isOurs)
		if rec.holds() {
			_, up.tainted = withTaint(node.Spec.Taints, &corev1.Taint{Key: TaintKey, Value: rec.strongest().String(), Effect: corev1.TaintEffectNoSchedule})
		}
		if k.dryRun {
			k.log.Info("kubedrain: dry run: would patch the node", "patch", string(patch))
			return nil
		}
		patched, err := k.client.CoreV1().Nodes().Patch(ctx, k.node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		if err == nil && up.cordoned && len(patched.ManagedFields) == 0 {
			k.trackCordon(ctx, patched.ResourceVersion)
		}
		return err
	})
	if !errors.Is(err, context.Canceled) {
		k.m.wrote(up, err, k.dryRun)
	}
	if err != nil {
		return up, fmt.Errorf("update node %s: %w", k.node, err)
	}
	return up, nil
}

// nodePatch returns the JSON merge patch that makes node match rec, or
// nil when it does already. A record with a reason that holds (see
// record.holds) wants the node cordoned and tainted with
// TaintKey=<strongest kind>:NoSchedule; if the node was schedulable,
// rec.Cordoned is set, as the cordon is then kubedrain's. A record
// without one wants kubedrain's marks gone: the taint, and the cordon if
// it is kubedrain's (rec.Cordoned, and the API server's field management
// agrees: see ownsCordon); the annotation goes with the last reason.
// A record with a reason to drain (see record.excludes) also wants
// ExcludeLabel=ExcludeValue: set, with rec.Excluded, on a node without
// the label; a label that is there already is someone else's and stays
// as it is. Without one, the label goes if it is kubedrain's
// (rec.Excluded, and its value is still kubedrain's). The patch sets the
// taints as a whole list, which is safe because it carries the node's
// resourceVersion.
func nodePatch(node *corev1.Node, rec *record) ([]byte, error) {
	spec := map[string]any{}
	annotations := map[string]any{}
	hold := rec.holds()
	switch {
	case hold && !node.Spec.Unschedulable:
		spec["unschedulable"] = true
		rec.Cordoned = true
	case !hold && node.Spec.Unschedulable && rec.Cordoned && ownsCordon(node):
		spec["unschedulable"] = nil
	}
	if !hold {
		rec.Cordoned = false // kubedrain holds no cordon now
	}
	_, annotated := node.Annotations[AnnotationKey]
	var want *corev1.Taint
	if hold {
		want = &corev1.Taint{Key: TaintKey, Value: rec.strongest().String(), Effect: corev1.TaintEffectNoSchedule}
	}
	// A taint with kubedrain's key on a node without its record is not
	// one kubedrain put there: it is left alone.
	if taints, changed := withTaint(node.Spec.Taints, want); changed && (hold || annotated) {
		spec["taints"] = taints
	}
	labels := map[string]any{}
	value, labelled := node.Labels[ExcludeLabel]
	if rec.Excluded && (!labelled || value != ExcludeValue) {
		rec.Excluded = false // removed or changed since: no longer kubedrain's
	}
	switch exclude := rec.excludes(); {
	case exclude && !labelled:
		labels[ExcludeLabel] = ExcludeValue
		rec.Excluded = true
	case !exclude && rec.Excluded:
		labels[ExcludeLabel] = nil
		rec.Excluded = false
	}
	switch {
	case len(rec.Reasons) > 0:
		b, err := json.Marshal(rec)
		if err != nil {
			return nil, fmt.Errorf("record: %w", err)
		}
		if node.Annotations[AnnotationKey] != string(b) {
			annotations[AnnotationKey] = string(b)
		}
	case annotated:
		annotations[AnnotationKey] = nil
	}
	if len(spec) == 0 && len(annotations) == 0 && len(labels) == 0 {
		return nil, nil
	}
	meta := map[string]any{"resourceVersion": node.ResourceVersion}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	patch := map[string]any{"metadata": meta}
	if len(spec) > 0 {
		patch["spec"] = spec
	}
	return json.Marshal(patch)
}

// withTaint returns taints with kubedrain's taint replaced by want, or
// removed when want is nil, and whether that changed anything. The other
// taints are kept as they are, in their order.
func withTaint(taints []corev1.Taint, want *corev1.Taint) ([]corev1.Taint, bool) {
	out := slices.DeleteFunc(slices.Clone(taints), isOurs)
	if want != nil {
		out = append(out, *want)
	}
	if len(out) == len(taints) && (want == nil || slices.ContainsFunc(taints, func(t corev1.Taint) bool {
		return t.Key == want.Key && t.Value == want.Value && t.Effect == want.Effect
	})) {
		return taints, false
	}
	if out == nil {
		out = []corev1.Taint{} // JSON [], not null: the patch must clear the list
	}
	return out, true
}

// trackCordon makes the API server track who owns spec.unschedulable on
// a node whose fields it does not track yet (nodes can come without
// managedFields, and then updates never add them; only an apply does):
// it applies the cordon kubedrain has just set, as its own field manager,
// so that ownsCordon sees an operator's uncordon and cordon from then on.
// The apply carries the resourceVersion of kubedrain's cordon: if anyone
// wrote the node since (an operator's uncordon), it fails rather than
// cordon again. It is best effort: without it ownsCordon trusts the
// record.
func (k *kube) trackCordon(ctx context.Context, resourceVersion string) {
	apply := fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q,"resourceVersion":%q},"spec":{"unschedulable":true}}`,
		k.node, resourceVersion)
	_, err := k.client.CoreV1().Nodes().Patch(ctx, k.node, types.ApplyPatchType, []byte(apply),
		metav1.PatchOptions{FieldManager: fieldManager, Force: new(true)})
	if err != nil {
		k.log.Debug("kubedrain: could not start field tracking of the cordon", "err", err)
	}
}

// isOurs reports whether t is kubedrain's taint: its key, NoSchedule.
// A taint with the same key and another effect is someone else's.
func isOurs(t corev1.Taint) bool {
	return t.Key == TaintKey && t.Effect == corev1.TaintEffectNoSchedule
}

// ownsCordon reports whether kubedrain's own write set the node's
// spec.unschedulable, as the API server's field management records it:
// an operator who uncordoned and cordoned the node again since then owns
// it now, whatever kubedrain's record says. A node without managed
// fields (they can be stripped) leaves it to the record.
func ownsCordon(node *corev1.Node) bool {
	if len(node.ManagedFields) == 0 {
		return true
	}
	for _, m := range node.ManagedFields {
		if m.FieldsV1 == nil || !strings.Contains(m.FieldsV1.GetRawString(), `"f:unschedulable"`) {
			continue
		}
		if m.Manager == fieldManager {
			return true
		}
	}
	return false
}

const (
	// maxNote is the API server's limit on an Event's note.
	maxNote = 1024
	// eventTimeout bounds the recording of one Event.
	eventTimeout = 2 * time.Second
)

// event records an Event about the node (events.k8s.io/v1, seen in
// kubectl describe node). Events are for people: a failure is logged and
// otherwise ignored.
func (k *kube) event(ctx context.Context, typ, reason, action, note string) {
	if k.dryRun {
		k.log.Info("kubedrain: dry run: would record an event", "reason", reason, "action", action, "note", note)
		return
	}
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		// Named as client-go's event recorder names them.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", k.node, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		EventTime:           now,
		ReportingController: "termsig.dev/kubedrain",
		ReportingInstance:   truncate(k.instance, 128),
		Action:              action,
		Reason:              reason,
		// The node's name as its UID, as the kubelet's own events have
		// it: kubectl describe node finds them.
		Regarding: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: k.node, UID: types.UID(k.node)},
		Note:      truncate(note, maxNote),
		Type:      typ,
	}
	// Events are for people: one that hangs must not hold up notices.
	ctx, cancel := context.WithTimeout(ctx, eventTimeout)
	defer cancel()
	if _, err := k.client.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !errors.Is(err, context.Canceled) {
		k.log.Warn("kubedrain: could not record an event on the node", "reason", reason, "err", err)
	}
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

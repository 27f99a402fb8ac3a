package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// mirrorAnnotation marks a mirror pod: the API server's copy of a static
// pod that the kubelet runs from a file. Evicting it does nothing.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// An evictor evicts the pods of its node.
type evictor struct {
	kube *kube
	// self is kubedrain's own pod, which stays to finish the drain; zero
	// outside a pod.
	self types.NamespacedName
	// exempt selects pods that are left alone (--pod-selector-exempt):
	// never evicted, nor waited for; nil selects none.
	exempt labels.Selector
	// margin is kept before the notice's deadline: grace periods end, and
	// retries stop, this much earlier.
	margin time.Duration
	// backoff is the first wait before an eviction, or the list of the
	// node's pods, is tried again after an error; it doubles up to
	// maxBackoff (see retry).
	backoff, maxBackoff time.Duration
	// goneEvery is how often the node's pods are listed while a drain
	// for a held termination waits for the evicted ones to be gone.
	goneEvery time.Duration
	now       func() time.Time
}

// A skip says why a pod is left on the node; empty means evict it.
type skip string

const (
	skipDaemonSet skip = "DaemonSet pod"
	skipMirror    skip = "mirror pod"
	skipSelf      skip = "kubedrain itself"
	skipFinished  skip = "finished"
	skipExempt    skip = "exempt by --pod-selector-exempt"
	skipElsewhere skip = "on another node"
)

// skipOf says whether pod is left alone, and why. DaemonSet pods would be
// recreated on the node at once, and tolerate unschedulable nodes; a
// mirror pod is not the API server's to stop; a finished pod holds no
// resources and keeps its status for whoever reads it; an exempt pod is
// the operator's to leave (it goes with the machine). A pod is exempt
// only when no other reason leaves it, so that the exempt count is of
// pods that would have been evicted.
func (e *evictor) skipOf(pod *corev1.Pod) skip {
	if pod.Spec.NodeName != e.kube.node {
		return skipElsewhere // the list's field selector is the server's to honour
	}
	if _, ok := pod.Annotations[mirrorAnnotation]; ok {
		return skipMirror
	}
	if c := metav1.GetControllerOf(pod); c != nil && c.Kind == "DaemonSet" {
		return skipDaemonSet
	}
	if pod.Namespace == e.self.Namespace && pod.Name == e.self.Name {
		return skipSelf
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return skipFinished
	}
	if e.exempt != nil && e.exempt.Matches(labels.Set(pod.Labels)) {
		return skipExempt
	}
	return ""
}

// gracePeriod returns the grace period to evict pod with: its own
// terminationGracePeriodSeconds (30 s if unset), shortened so that it
// ends margin before the deadline, and at least 1 s, since 0 would delete
// the pod at once without telling its containers. A zero deadline
// (unknown) keeps the pod's own. A pod that asked for 0 keeps 0.
func gracePeriod(pod *corev1.Pod, deadline, now time.Time, margin time.Duration) int64 {
	own := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		own = max(*g, 0)
	}
	if deadline.IsZero() {
		return own
	}
	end := deadline.Add(-margin)
	if !end.After(now) {
		return min(own, 1) // compared as times: a Duration would overflow
	}
	return min(own, max(int64(end.Sub(now)/time.Second), 1))
}

// localStorage reports whether pod keeps data on the node (emptyDir
// volumes): evicting it loses that data, as the machine's end would.
func localStorage(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}

// An outcome is how the eviction of one pod ended.
type outcome int

const (
	evicted outcome = iota // the API server accepted the eviction
	gone                   // the pod was already gone
	refused                // a PodDisruptionBudget refused it until the end
	failed                 // another error, until the end
)

// A drainReport counts what a drain did.
type drainReport struct {
	Evicted, Gone, Refused, Failed, Skipped int
	// Exempt counts the skipped pods that --pod-selector-exempt left.
	Exempt int
	// terminating are the pods evicted, or found terminating, by UID
	// (with their namespace/name): those that are still to go.
	terminating map[types.UID]string
}

// drain evicts every pod on the node except those skipOf leaves, all at
// once (and says once how many --pod-selector-exempt left), and returns when each eviction was accepted or ctx is done; ctx
// ends with the drain (see controller.follow), deadline gives what caps
// the grace periods at each attempt (zero: the pods' own; a held
// termination's moves later as the hold is extended). A pod whose
// eviction a PodDisruptionBudget refuses (429) is tried again with
// backoff until then, and then left (the machine is going away anyway);
// so is the list of the node's pods (see pods). It returns
// context.Canceled if ctx was cancelled so: the drain was stopped, not
// over.
func (e *evictor) drain(ctx context.Context, deadline func() time.Time, log *slog.Logger) (drainReport, error) {
	rep := drainReport{terminating: map[types.UID]string{}}
	pods, err := e.pods(ctx, log)
	if err != nil {
		return rep, err
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := range pods {
		pod := &pods[i]
		if why := e.skipOf(pod); why != "" {
			log.Debug("kubedrain: leaving pod", "pod", podName(pod), "why", string(why))
			rep.Skipped++
			if why == skipExempt {
				rep.Exempt++
			}
			continue
		}
		if g := pod.DeletionGracePeriodSeconds; pod.DeletionTimestamp != nil && g != nil && *g <= gracePeriod(pod, deadline(), e.now(), e.margin) {
			log.Debug("kubedrain: leaving pod: already terminating", "pod", podName(pod), "grace", *g)
			rep.Gone++
			rep.terminating[pod.UID] = podName(pod)
			continue
		}
		if localStorage(pod) {
			log.Info("kubedrain: evicting a pod with local storage: its emptyDir data is lost with the machine", "pod", podName(pod))
		}
		wg.Go(func() {
			out := e.evict(ctx, pod, deadline, log)
			mu.Lock()
			defer mu.Unlock()
			switch out {
			case evicted:
				rep.Evicted++
				rep.terminating[pod.UID] = podName(pod)
			case gone:
				rep.Gone++
			case refused:
				rep.Refused++
			default:
				rep.Failed++
			}
		})
	}
	if e.exempt != nil {
		log.Info("kubedrain: leaving the pods exempt by --pod-selector-exempt: they are neither evicted nor waited for",
			"selector", e.exempt.String(), "pods", rep.Exempt)
	}
	wg.Wait()
	if stopped(ctx) {
		return rep, context.Canceled // stopped, not over
	}
	return rep, nil
}

// stopped reports whether ctx was cancelled (the drain stopped, kubedrain
// stopping) rather than ended at the drain's end.
func stopped(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled)
}

// evict asks the API server to evict pod, trying again after a refusal
// or an error until it is accepted or ctx is done. Each attempt has the
// grace period that ends margin before deadline then (see gracePeriod),
// so that a pod a budget lets go late gets only the time that is left.
// The eviction is for this pod only (a UID precondition): a StatefulSet's
// new pod of the same name is not evicted by mistake.
func (e *evictor) evict(ctx context.Context, pod *corev1.Pod, deadline func() time.Time, log *slog.Logger) outcome {
	if e.kube.dryRun {
		log.Info("kubedrain: dry run: would evict", "pod", podName(pod), "grace", gracePeriod(pod, deadline(), e.now(), e.margin))
		e.kube.m.evicted(resultDryRun)
		return evicted
	}
	var (
		out     outcome
		lastErr error
	)
	if e.retry(ctx, func() bool {
		grace := gracePeriod(pod, deadline(), e.now(), e.margin)
		err := e.kube.client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			DeleteOptions: &metav1.DeleteOptions{
				GracePeriodSeconds: &grace,
				Preconditions:      &metav1.Preconditions{UID: &pod.UID},
			},
		})
		switch {
		case err == nil:
			log.Info("kubedrain: evicted", "pod", podName(pod), "grace", grace)
			out = evicted
			return true
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Conflict: the UID precondition failed, the pod was replaced.
			out = gone
			return true
		case ctx.Err() != nil:
			return false
		}
		if lastErr == nil || lastErr.Error() != err.Error() {
			log.Info("kubedrain: eviction refused, trying again", "pod", podName(pod), "err", err)
		}
		lastErr = err
		return false
	}) {
		e.kube.m.evicted(out.String())
		return out
	}
	out = e.leave(pod, lastErr, log)
	if !stopped(ctx) {
		// A drain stopped (kubedrain stopping, or a drain started anew)
		// has not seen its evictions end.
		e.kube.m.evicted(out.String())
	}
	return out
}

// pods lists the pods of the node, trying again after an error that may
// pass (see transient) until the list answers or ctx is done: the API
// server is most likely loaded (500s from etcd timeouts, 429s outlasting
// client-go's own retries) exactly when many machines go at once, and
// one failed list must not leave every pod on the node.
func (e *evictor) pods(ctx context.Context, log *slog.Logger) ([]corev1.Pod, error) {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", e.kube.node).String()}
	var (
		pods         []corev1.Pod
		err, lastErr error
		tries        int
	)
	start := time.Now()
	listed := e.retry(ctx, func() bool {
		tries++
		var list *corev1.PodList
		list, err = e.kube.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		switch {
		case err == nil:
			if tries > 1 {
				log.Info("kubedrain: listed the node's pods", "after-failures", tries-1)
			}
			pods = list.Items
			return true
		case ctx.Err() != nil:
			return false
		case !transient(err):
			return true
		}
		// One line per failure that changes, not one per retry.
		if lastErr == nil || lastErr.Error() != err.Error() {
			log.Warn("kubedrain: listing the node's pods failed, trying again", "err", err)
		}
		lastErr = err
		return false
	})
	switch {
	case listed && err == nil:
		return pods, nil
	case listed:
		return nil, fmt.Errorf("list the pods of node %s: %w", e.kube.node, err)
	case stopped(ctx):
		return nil, context.Canceled
	}
	if lastErr == nil {
		lastErr = context.Cause(ctx)
	}
	return nil, fmt.Errorf("could not list the pods of node %s before the drain's end (%d tries in %v), none was evicted: %w",
		e.kube.node, tries, time.Since(start).Round(time.Millisecond), lastErr)
}

// awaitGone waits until none of pods (by UID) is on the node any more,
// or has finished, listing the node's pods every goneEvery, and returns
// nil; or until ctx is done, and returns its cause. A list that fails in
// a way that may pass is tried again at the next look; one that will not
// (see transient) ends the wait with its error.
func (e *evictor) awaitGone(ctx context.Context, pods map[types.UID]string, log *slog.Logger) error {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", e.kube.node).String()}
	var lastErr error
	logged := false
	for {
		list, err := e.kube.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case err != nil && !transient(err):
			return fmt.Errorf("list the pods of node %s: %w", e.kube.node, err)
		case err != nil:
			if lastErr == nil || lastErr.Error() != err.Error() {
				log.Warn("kubedrain: listing the node's pods failed, trying again", "err", err)
			}
			lastErr = err
		default:
			var left []string
			for i := range list.Items {
				p := &list.Items[i]
				if _, ok := pods[p.UID]; ok && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					left = append(left, podName(p))
				}
			}
			if len(left) == 0 {
				return nil
			}
			if !logged {
				logged = true
				log.Info("kubedrain: waiting for the evicted pods to be gone", "pods", left)
			}
		}
		t := time.NewTimer(e.goneEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// retry calls try until it reports done or ctx is done, and reports
// whether it was done. Between calls it waits backoff, doubling up to
// maxBackoff, jittered: evictions and the pod list are spaced alike, and
// so are node writes, which cannot wait here (see controller.flush).
func (e *evictor) retry(ctx context.Context, try func() (done bool)) bool {
	wait := e.backoff
	for !try() {
		t := time.NewTimer(jitter(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, e.maxBackoff)
	}
	return true
}

// leave logs that pod stays on the node, as the time to evict it is
// over, and says why.
func (e *evictor) leave(pod *corev1.Pod, lastErr error, log *slog.Logger) outcome {
	if apierrors.IsTooManyRequests(lastErr) {
		log.Warn("kubedrain: leaving the pod: its PodDisruptionBudget refused every eviction until the deadline", "pod", podName(pod), "err", lastErr)
		return refused
	}
	if lastErr == nil {
		lastErr = errors.New("no time left")
	}
	log.Warn("kubedrain: leaving the pod: it could not be evicted before the deadline", "pod", podName(pod), "err", lastErr)
	return failed
}

// jitter spreads d over [d/2, d), so that pods behind one budget do not
// retry in step.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

func podName(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

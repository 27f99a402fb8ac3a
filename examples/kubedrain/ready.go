package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errNoNodeRead is the "node" check of /readyz before kubedrain's first
// read of its node has answered.
var errNoNodeRead = errors.New("no node read yet")

// A nodeRead is the readiness of kubedrain's first read of its node: the
// "node" check of /readyz fails until a GET of the node has worked once,
// with the last read's error meanwhile. Safe for concurrent use.
type nodeRead struct {
	mu      sync.Mutex
	ok      bool
	lastErr error
}

// got records the result of a GET of the node.
func (r *nodeRead) got(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.ok, r.lastErr = true, nil
	} else if !r.ok {
		r.lastErr = err
	}
}

// check is the "node" check of /readyz.
func (r *nodeRead) check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.ok:
		return nil
	case r.lastErr != nil:
		return r.lastErr
	}
	return errNoNodeRead
}

// done reports whether a read has worked.
func (r *nodeRead) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok
}

// readUntilDone reads the node, every wait doubling up to maxWait, until
// a read works or ctx is done: after a start with the API server away,
// /readyz turns ready once it is back, without waiting for a notice to
// make kubedrain write the node.
func (k *kube) readUntilDone(ctx context.Context, wait, maxWait time.Duration, log *slog.Logger) {
	for !k.read.done() {
		t := time.NewTimer(jitter(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, maxWait)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := k.client.CoreV1().Nodes().Get(rctx, k.node, metav1.GetOptions{})
		cancel()
		if ctx.Err() != nil {
			return
		}
		k.read.got(err)
		if err == nil {
			log.Info("kubedrain: read the node: the API server answers")
		}
	}
}

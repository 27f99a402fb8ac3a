// Package fakefault is the fault injection that the fake HTTP services
// (imdstest, gcemetatest, azuretest) share: a [Queue] of the
// [termsigtest.Fault]s a test injected, and the [Effects] a fault has on
// the request that takes it (hang, delay, a dropped connection, an answer
// in the server's place). What only one protocol has (gcemetatest's
// NoLongPoll and Foreign) is applied by that fake.
package fakefault

import "sync"

// A Queue holds the faults injected into a fake server, in the order they
// were injected. T is what the server needs of a fault when a request
// takes it: [Effects], or a struct of the server's own that holds them.
//
// The zero Queue is empty and ready to use. Its methods are safe for
// concurrent use, and never call out of the Queue while they hold its
// lock, so a server may call them with a lock of its own held.
type Queue[T any] struct {
	mu      sync.Mutex
	faults  []*entry[T]
	cleared chan struct{} // closed by Clear; nil until Take hands one out
}

type entry[T any] struct {
	key   string
	count int // requests left; 0 or less: every request until Clear
	fault T
}

// Add appends fault to q, limited to requests for key ("" for every
// request), and to count of them (0 or less for every request until
// [Queue.Clear]).
func (q *Queue[T]) Add(key string, count int, fault T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults = append(q.faults, &entry[T]{key: key, count: count, fault: fault})
}

// Clear removes every fault, and closes the channels that [Queue.Take]
// has handed out, so that requests hanging on a fault go on.
func (q *Queue[T]) Clear() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults = nil
	if q.cleared != nil {
		close(q.cleared)
		q.cleared = nil
	}
}

// Take returns the first fault in q for key (added for key or for every
// request), with ok true, and counts the request against it: a fault is
// removed once its count is used up, so that each request takes at most
// one fault and the next fault in line applies from then on. cleared is
// closed by the next [Queue.Clear]. ok is false if no fault applies.
func (q *Queue[T]) Take(key string) (fault T, cleared <-chan struct{}, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.faults {
		if e.key != "" && e.key != key {
			continue
		}
		if e.count > 0 {
			e.count--
			if e.count == 0 {
				q.faults = append(q.faults[:i:i], q.faults[i+1:]...)
			}
		}
		if q.cleared == nil {
			q.cleared = make(chan struct{})
		}
		return e.fault, q.cleared, true
	}
	return fault, nil, false
}

package fakefault_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/internal/fakefault"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fault is one Add to a Queue[string], the string naming the fault.
type fault struct {
	key   string
	count int
	name  string
}

// Which fault successive requests take; "" for none.
func TestQueueTake(t *testing.T) {
	type take struct{ key, want string }
	for _, tc := range []struct {
		name   string
		faults []fault
		takes  []take
	}{
		{"empty", nil, []take{{"a", ""}}},
		{"every key", []fault{{"", 0, "f"}}, []take{{"a", "f"}, {"b", "f"}, {"", "f"}}},
		{"own key only", []fault{{"a", 0, "f"}}, []take{{"b", ""}, {"a", "f"}, {"", ""}}},
		{"count runs out", []fault{{"", 2, "f"}}, []take{{"a", "f"}, {"b", "f"}, {"a", ""}}},
		{"negative count is forever", []fault{{"", -1, "f"}}, []take{{"a", "f"}, {"a", "f"}, {"a", "f"}}},
		{"in the order added", []fault{{"", 1, "f"}, {"", 1, "g"}, {"", 0, "h"}},
			[]take{{"a", "f"}, {"a", "g"}, {"a", "h"}, {"a", "h"}}},
		{"another key's fault waits its turn", []fault{{"a", 1, "f"}, {"", 1, "g"}, {"b", 0, "h"}},
			[]take{{"b", "g"}, {"b", "h"}, {"a", "f"}, {"a", ""}}},
		{"a request takes one fault", []fault{{"a", 1, "f"}, {"a", 1, "g"}},
			[]take{{"a", "f"}, {"a", "g"}, {"a", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q fakefault.Queue[string]
			for _, f := range tc.faults {
				q.Add(f.key, f.count, f.name)
			}
			for i, tk := range tc.takes {
				got, cleared, ok := q.Take(tk.key)
				assert.Equal(t, tk.want, got, "take %d (%q)", i+1, tk.key)
				assert.Equal(t, tk.want != "", ok, "take %d (%q)", i+1, tk.key)
				assert.Equal(t, ok, cleared != nil, "a channel with every fault, and only then")
			}
		})
	}
}

func TestQueueClear(t *testing.T) {
	var q fakefault.Queue[string]
	q.Clear() // on the zero Queue
	q.Add("", 0, "f")
	_, before, ok := q.Take("a")
	require.True(t, ok)
	_, same, _ := q.Take("a")
	assert.Equal(t, before, same, "one channel until Clear")
	assert.False(t, isClosed(before), "closed before Clear")

	q.Clear()
	assert.True(t, isClosed(before), "Clear closes what Take handed out")
	_, _, ok = q.Take("a")
	assert.False(t, ok, "Clear removes the faults")
	q.Clear() // twice is fine

	q.Add("", 0, "g")
	_, after, ok := q.Take("a")
	require.True(t, ok)
	assert.False(t, isClosed(after), "a fresh channel after Clear")
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Concurrent requests take a counted fault exactly Count times.
func TestQueueConcurrent(t *testing.T) {
	var q fakefault.Queue[int]
	q.Add("", 10, 1)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		hits int
	)
	for range 50 {
		wg.Go(func() {
			if _, _, ok := q.Take("a"); ok {
				mu.Lock()
				hits++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 10, hits)
}

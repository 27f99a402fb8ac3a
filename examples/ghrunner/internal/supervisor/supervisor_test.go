//go:build unix

package supervisor

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghapi"
)

func TestRerunStopsAtMaxAttempts(t *testing.T) {
	s := &supervisor{cfg: Config{MaxAttempts: 5}, log: slog.New(slog.DiscardHandler)}
	// s.api is nil: a call would panic.
	requested, err := s.rerunRun(t.Context(), &ghapi.Job{Run: 1, Attempt: 5})
	assert.NoError(t, err)
	assert.False(t, requested)
}

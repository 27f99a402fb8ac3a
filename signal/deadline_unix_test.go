//go:build !windows

package signal_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/signal"
)

// Where no systemd answers (a container, Kubernetes, ECS, macOS), the
// SIGTERM deadline is what Config or TERMSIG_STOP_TIMEOUT says, and
// without either there is none; the other signals never have one.
func TestSIGTERMDeadlineWithoutSystemd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config time.Duration
		env    string
		want   time.Duration
	}{
		{"nothing said", 0, "", 0},
		{"Config", 5 * time.Second, "", 5 * time.Second},
		{"terminationGracePeriodSeconds in the environment", 0, "30", 30 * time.Second},
		{"Config before the environment", 5 * time.Second, "30", 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(signal.StopTimeoutEnv, tc.env)
			c := signal.Config{StopTimeout: tc.config, Logger: testlog.New().Logger()}
			n := termsig.New(c.New())
			defer n.Stop()
			term := raise(t, n, syscall.SIGTERM)
			if tc.want == 0 {
				assert.True(t, term.Deadline.IsZero(), "no deadline")
			} else {
				assert.Equal(t, tc.want, term.Deadline.Sub(term.Observed))
			}
			assert.True(t, raise(t, n, syscall.SIGINT).Deadline.IsZero())
		})
	}
}

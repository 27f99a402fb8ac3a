package systemdtest_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain keeps the example off the host's own systemd and its
// environment (see package signal's TestMain).
func TestMain(m *testing.M) {
	os.Unsetenv("INVOCATION_ID")
	os.Unsetenv("TERMSIG_STOP_TIMEOUT")
	goleak.VerifyTestMain(m)
}

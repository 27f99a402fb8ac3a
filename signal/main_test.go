package signal_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain keeps the tests off the host's own systemd: a test that runs
// as a service (a CI runner's job) inherits INVOCATION_ID, and the host's
// bus would answer. Each test that wants a systemd starts its own.
func TestMain(m *testing.M) {
	os.Unsetenv("INVOCATION_ID")
	os.Unsetenv("TERMSIG_STOP_TIMEOUT")
	os.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/termsig-test/bus")
	goleak.VerifyTestMain(m)
}

package termsig_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(drainChild()) // the child of TestSecondSignalDoesNotKillTheDrain
	}
	goleak.VerifyTestMain(m)
}

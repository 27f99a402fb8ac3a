//go:build linux

package chaos_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The harness removes the binaries it built once the tests end, although
// goleak.VerifyTestMain ends the process with os.Exit.
func TestHarnessRemovesWhatItBuilt(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "left in TMPDIR")
}

//go:build linux

package main_test

import (
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersion: --version prints the version line on standard output and
// exits 0, without reading the join token or validating the other flags.
func TestVersion(t *testing.T) {
	cmd := exec.Command(runnerBin, "--version", "-poll", "0s")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	require.NoError(t, err, "runner --version")
	assert.Regexp(t, `^runner \S.* go\S+ `+runtime.GOOS+"/"+runtime.GOARCH+"\n$", string(out))
}

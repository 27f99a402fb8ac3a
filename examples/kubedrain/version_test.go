package main

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersion: --version prints the version line on standard output and
// exits 0, with no node to drain and no cluster to reach.
func TestVersion(t *testing.T) {
	bin, err := buildKubedrain()
	require.NoError(t, err)
	cmd := exec.Command(bin, "--version")
	cmd.Env = append(os.Environ(), "NODE_NAME=", "KUBECONFIG=/nonexistent")
	out, err := cmd.Output()
	require.NoError(t, err, "kubedrain --version")
	assert.Regexp(t, `^kubedrain \S.* go\S+ `+runtime.GOOS+"/"+runtime.GOARCH+"\n$", string(out))
}

//go:build unix

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
// exits 0, with no repository, runner directory nor token given, and as
// root without RUNNER_ALLOW_RUNASROOT.
func TestVersion(t *testing.T) {
	cmd := exec.Command(ghrunnerBin, "--version")
	cmd.Env = append(os.Environ(), tokenEnv+"=", allowRootEnv+"=")
	out, err := cmd.Output()
	require.NoError(t, err, "ghrunner --version")
	assert.Regexp(t, `^ghrunner \S.* go\S+ `+runtime.GOOS+"/"+runtime.GOARCH+"\n$", string(out))
}

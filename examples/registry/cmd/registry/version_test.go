//go:build unix

package main_test

import (
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersion: --version prints the version line on standard output and
// exits 0, without creating the state or token files.
func TestVersion(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--version")
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err, "registry --version")
	assert.Regexp(t, `^registry \S.* go\S+ `+runtime.GOOS+"/"+runtime.GOARCH+"\n$", string(out))
	assert.NoFileExists(t, dir+"/registry.json")
	assert.NoFileExists(t, dir+"/registry.json.admin-token")
}

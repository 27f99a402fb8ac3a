//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The state file, which holds the runner's token, is written through a
// new file of its own: a link or a loose file planted beside it beforehand
// gets nothing.
func TestStateFileIsNotWrittenThroughAPlantedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runner-state.json")
	stolen := filepath.Join(dir, "stolen")
	require.NoError(t, os.WriteFile(stolen, nil, 0o666))
	require.NoError(t, os.Symlink(stolen, path+".tmp"))

	require.NoError(t, writeSaved(path, savedState{ID: "r-1", Token: "secret-token"}))

	b, err := os.ReadFile(stolen)
	require.NoError(t, err)
	assert.Empty(t, b, "the token went through the planted link")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	s, err := loadSaved(path)
	require.NoError(t, err)
	assert.Equal(t, "secret-token", s.Token)
}

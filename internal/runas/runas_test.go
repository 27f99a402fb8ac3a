//go:build unix

package runas

import (
	"os"
	"os/user"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLookupResolvesIdsHomeAndGroups(t *testing.T) {
	me, err := user.Current()
	require.NoError(t, err)
	a, err := Lookup(me.Username)
	require.NoError(t, err)
	assert.Equal(t, os.Getuid(), a.UID)
	assert.Equal(t, me.HomeDir, a.Home)
	cred, err := a.Credential()
	require.NoError(t, err)
	assert.Equal(t, uint32(a.UID), cred.Uid)
	assert.Equal(t, uint32(a.GID), cred.Gid)
	gid, _ := strconv.ParseUint(me.Gid, 10, 32)
	assert.Contains(t, cred.Groups, uint32(gid), "the primary group is among the groups")
}

func TestLookupOfAnUnknownUserIsAnError(t *testing.T) {
	_, err := Lookup("no-such-user-here")
	assert.Error(t, err)
}

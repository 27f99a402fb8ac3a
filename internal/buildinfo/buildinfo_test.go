package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVersionIsTheModuleVersionOfAnInstalledBinary(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/termsig/termsig", Version: "v0.1.0"}}
	assert.Equal(t, "v0.1.0", version(bi))
}

func TestVersionOfACheckoutNamesItsCommit(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"},
	}}
	assert.Equal(t, "(devel) 0123456789ab+dirty", version(bi))
	bi.Settings[1].Value = "false"
	assert.Equal(t, "(devel) 0123456789ab", version(bi))
	assert.Equal(t, "(devel)", version(&debug.BuildInfo{}))
}

func TestLineNamesTheBinaryAndItsPlatform(t *testing.T) {
	l := Line("termsig")
	assert.True(t, strings.HasPrefix(l, "termsig "), l)
	assert.Len(t, strings.Fields(l), 4+strings.Count(Version(), " "), l)
}

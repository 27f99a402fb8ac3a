package logind_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/logind"
)

// A bad address is a mistake of the Config, reported with where it came
// from, as the HTTP sources name their field or environment variable.
func TestABadAddressNamesWhereItCameFrom(t *testing.T) {
	for _, tc := range []struct {
		name, env, address, want string
	}{
		{"environment", "garbage", "", `logind: DBUS_SYSTEM_BUS_ADDRESS: "garbage": "garbage" is not a D-Bus address (transport:key=value,...)`},
		{"Config.Address", "", "garbage", `logind: Config.Address: "garbage": "garbage" is not a D-Bus address (transport:key=value,...)`},
		{"Config.Address over the environment", "unix:path=/x", "ftp:host=h", `logind: Config.Address: "ftp:host=h": "ftp:host=h": only unix:path=, unix:abstract= and tcp:host=,port= are supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", tc.env)
			err := logind.New(logind.Config{Address: tc.address}).Available()
			assert.EqualError(t, err, tc.want)
			assert.NotErrorIs(t, err, termsig.ErrUnavailable)
		})
	}

	// A good Config.Address is used as it is: a bad environment variable
	// is not read.
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "garbage")
	err := logind.New(logind.Config{Address: "unix:path=" + filepath.Join(t.TempDir(), "no_bus")}).Available()
	assert.ErrorIs(t, err, termsig.ErrUnavailable)
}

package sources_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
	"github.com/termsig/termsig/sources"
)

// A Root whose name has the characters a D-Bus address gives a meaning to
// must be detected and also reached: the source takes its lock there.
func TestDetectLogindRootEscaping(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	bus, fake := logindtest.Start(t, logindtest.Config{})
	for _, name := range []string{"a,b", "a;b", "a b", "a%b", "a=b", "a%2cb"} {
		t.Run(name, func(t *testing.T) {
			clean(t)
			root := filepath.Join(t.TempDir(), name)
			require.NoError(t, os.MkdirAll(filepath.Join(root, "var/run/dbus"), 0o755))
			require.NoError(t, os.Symlink(bus.Socket(), filepath.Join(root, "var/run/dbus/system_bus_socket")))
			var lg termsig.Source
			for _, s := range sources.Detect(sources.Config{Root: root}) {
				if s.Name() == logind.Name {
					lg = s
				}
			}
			require.NotNil(t, lg, "logind detected")
			before := len(fake.Inhibitors())
			n := termsig.New(lg)
			defer n.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			assert.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return len(all) > before }), "%+v", n.Status())
		})
	}
}

// A host's root mounted at Root, laid out as every systemd distribution
// lays it out: var/run is a symlink to the absolute path /run. The bus
// found must be the one under Root, not the one of the machine the
// program runs on.
func TestDetectLogindRootWithVarRunSymlink(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	bus, fake := logindtest.Start(t, logindtest.Config{})
	clean(t)
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "run/dbus"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var"), 0o755))
	require.NoError(t, os.Symlink("/run", filepath.Join(root, "var/run")))
	require.NoError(t, os.Symlink(bus.Socket(), filepath.Join(root, "run/dbus/system_bus_socket")))
	var lg termsig.Source
	for _, s := range sources.Detect(sources.Config{Root: root}) {
		if s.Name() == logind.Name {
			lg = s
		}
	}
	require.NotNil(t, lg, "logind detected under Root")
	n := termsig.New(lg)
	defer n.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	assert.NoError(t, fake.Wait(ctx, func([]logindtest.Inhibitor) bool { return len(fake.Held()) == 1 }), "%+v", n.Status())
}

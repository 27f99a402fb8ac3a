package acpitest_test

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/acpi/acpitest"
)

func TestInputDevice(t *testing.T) {
	in, err := acpitest.NewInput()
	require.NoError(t, err)
	defer in.Close()
	d, err := in.AddDevice("Power Button", acpitest.KeyPower)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(filepath.Dir(in.Devices()), "event0"), d.Path())
	assert.Equal(t, filepath.Join(in.Root(), "dev/input/event0"), d.Path(), "laid out like /")
	m, err := filepath.Glob(in.Devices())
	require.NoError(t, err)
	assert.Equal(t, []string{d.Path()}, m)

	caps, err := os.ReadFile(filepath.Join(in.Root(), "sys/class/input/event0/device/capabilities/key"))
	require.NoError(t, err)
	assert.Equal(t, acpitest.KeyBitmap(acpitest.KeyPower), string(caps))
	name, err := os.ReadFile(filepath.Join(in.Root(), "sys/class/input/event0/device/name"))
	require.NoError(t, err)
	assert.Equal(t, "Power Button\n", string(name))

	fi, err := os.Stat(d.Path())
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeNamedPipe)

	// A reader that opens the node without blocking reads what is written.
	f, err := os.OpenFile(d.Path(), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.SetReadDeadline(time.Now().Add(5*time.Second)), "a FIFO can take a deadline")
	require.NoError(t, d.PressPowerButton())
	got := make([]byte, 4*acpitest.InputEventSize)
	_, err = io.ReadFull(f, got)
	require.NoError(t, err)
	assert.Equal(t, acpitest.KeyPower, int(got[2*8+2]))

	// Closing the device is the end of the file for its reader.
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "idempotent")
	_, err = f.Read(got)
	assert.ErrorIs(t, err, io.EOF)
}

func TestInputRecording(t *testing.T) {
	in, err := acpitest.NewInput()
	require.NoError(t, err)
	press := acpitest.PowerPress(time.Now())
	p, err := in.AddRecording("Power Button", press, acpitest.KeyPower)
	require.NoError(t, err)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, press, b)
	require.NoError(t, in.Close())
	_, err = os.Stat(filepath.Dir(in.Devices()))
	assert.ErrorIs(t, err, os.ErrNotExist, "Close removes the tree")
}

package acpitest_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/acpi/acpitest"
)

func ctxWait(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, a *acpitest.Acpid) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", a.Path())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	return c, bufio.NewReader(c)
}

func TestAcpidServesLines(t *testing.T) {
	a, err := acpitest.NewAcpid()
	require.NoError(t, err)
	defer a.Close()
	fi, err := os.Stat(a.Path())
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSocket)
	assert.Less(t, len(a.Path()), 100, "fits in sun_path")

	n, err := a.Send("nobody listens")
	assert.NoError(t, err)
	assert.Zero(t, n)

	c1, r1 := dial(t, a)
	_, r2 := dial(t, a)
	require.NoError(t, a.WaitClients(ctxWait(t), 2))
	assert.Equal(t, 2, a.Clients())
	assert.Equal(t, 2, a.Accepted())

	n, err = a.PressPowerButton()
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	for _, r := range []*bufio.Reader{r1, r2} {
		for _, want := range []string{acpitest.PowerButtonInputLine, acpitest.PowerButtonLine} {
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			assert.Equal(t, want+"\n", line)
		}
	}

	// A client that hangs up is counted out.
	c1.Close()
	require.NoError(t, a.WaitClients(ctxWait(t), 1))
	n, err = a.SendRaw([]byte("partial"))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestAcpidStopAndStart(t *testing.T) {
	a, err := acpitest.NewAcpid()
	require.NoError(t, err)
	_, r := dial(t, a)
	require.NoError(t, a.WaitClients(ctxWait(t), 1))

	a.Stop()
	_, err = r.ReadString('\n')
	assert.Error(t, err, "acpid's exit closes its clients")
	_, err = os.Stat(a.Path())
	assert.ErrorIs(t, err, os.ErrNotExist, "and removes its socket")
	assert.Zero(t, a.Clients())
	_, err = net.Dial("unix", a.Path())
	assert.Error(t, err)

	require.NoError(t, a.Start())
	require.NoError(t, a.Start(), "twice is fine")
	_, r = dial(t, a)
	require.NoError(t, a.WaitAccepted(ctxWait(t), 2))
	_, err = a.Send(acpitest.LidCloseLine)
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, acpitest.LidCloseLine+"\n", line)

	require.NoError(t, a.Close())
	assert.Error(t, a.Start(), "closed for good")
	a.Stop() // harmless after Close
}

func TestAcpidWaitClientsHonoursCtx(t *testing.T) {
	a, err := acpitest.NewAcpid()
	require.NoError(t, err)
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, a.WaitClients(ctx, 1), context.Canceled)
}

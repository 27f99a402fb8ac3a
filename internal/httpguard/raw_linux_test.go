package httpguard

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpPair returns both ends of a loopback TCP connection, the client's
// reading and writing by raw system calls.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	s, err := ln.Accept()
	require.NoError(t, err)
	client = wrapRaw(c)
	require.IsType(t, &rawConn{}, client)
	t.Cleanup(func() { client.Close(); s.Close() })
	return client, s
}

// More than the socket's buffers hold: the writer waits for room (EAGAIN)
// in the netpoller, and every byte arrives in order.
func TestRawConnWritesAndReadsEverything(t *testing.T) {
	client, server := tcpPair(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	errc := make(chan error, 1)
	go func() {
		_, err := client.Write(data)
		errc <- err
	}()
	got, err := io.ReadAll(io.LimitReader(server, int64(len(data))))
	require.NoError(t, err)
	require.NoError(t, <-errc)
	assert.True(t, bytes.Equal(data, got))

	_, err = server.Write([]byte("answer"))
	require.NoError(t, err)
	buf := make([]byte, 16)
	n, err := client.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "answer", string(buf[:n]))
	server.Close()
	_, err = client.Read(buf)
	assert.ErrorIs(t, err, io.EOF)
}

// A deadline ends a read that waits, as for a net.Conn, with an error that
// says it timed out; Close ends it too.
func TestRawConnDeadlineAndClose(t *testing.T) {
	client, _ := tcpPair(t)
	require.NoError(t, client.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := client.Read(make([]byte, 8))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	assert.True(t, errors.As(err, &ne) && ne.Timeout())

	require.NoError(t, client.SetReadDeadline(time.Time{}))
	errc := make(chan error, 1)
	go func() {
		_, err := client.Read(make([]byte, 8))
		errc <- err
	}()
	client.Close()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, net.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the read")
	}
}

// Reading from, then writing to, a connection the peer reset fails with
// an error (ECONNRESET, EPIPE), not a signal.
func TestRawConnAfterReset(t *testing.T) {
	client, server := tcpPair(t)
	require.NoError(t, server.(*net.TCPConn).SetLinger(0))
	server.Close()                         // RST
	_, err := client.Read(make([]byte, 8)) // returns once the RST is in
	var oe *net.OpError
	assert.True(t, errors.As(err, &oe), "read: got %v", err)
	_, err = client.Write([]byte("x"))
	assert.True(t, errors.As(err, &oe), "write: got %v", err)
}

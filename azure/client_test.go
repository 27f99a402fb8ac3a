package azure_test

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/internal/testlog"
)

// The source's own client keeps its connection for the next poll: many
// polls, one connection (the metadata service is on the same host for
// ever; a new connection per poll is a waste on both sides).
func TestPollsShareAConnection(t *testing.T) {
	var front *connCounter
	h := start(t, options{endpoint: func(s *azuretest.Server) string {
		front = newConnCounter(t, s.URL[len("http://"):])
		return "http://" + front.addr()
	}})
	h.polls(azuretest.PathScheduledEvents, 20)
	assert.Equal(t, 1, front.accepted(), "connections for 20 polls and the name")
}

// A nil Config.Logger is slog.Default().
func TestNilLoggerIsSlogDefault(t *testing.T) {
	logs := testlog.New()
	old := slog.Default()
	slog.SetDefault(logs.Logger())
	t.Cleanup(func() { slog.SetDefault(old) })

	srv := azuretest.NewServer()
	defer srv.Close()
	srv.SetEvents(pending)
	n := termsig.Config{Logger: testlog.New().Logger()}.New(azure.New(fast(srv)))
	defer n.Stop()
	assert.Equal(t, "pending", receive(t, n).Event)
	rec := logs.WaitFor(t, "azure: watching the scheduled events of this VM", 1)
	assert.Equal(t, "test-vm", testlog.Attr(rec, "vm"))
}

// connCounter is a TCP relay in front of a server that counts the
// connections it accepts.
type connCounter struct {
	ln net.Listener
	wg sync.WaitGroup

	mu    sync.Mutex
	n     int
	conns []net.Conn
}

func newConnCounter(t *testing.T, to string) *connCounter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &connCounter{ln: ln}
	c.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.n++
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			c.wg.Go(func() { _, _ = io.Copy(out, in); out.Close() })
			c.wg.Go(func() { _, _ = io.Copy(in, out); in.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		c.mu.Lock()
		for _, conn := range c.conns {
			conn.Close()
		}
		c.mu.Unlock()
		c.wg.Wait()
	})
	return c
}

func (c *connCounter) addr() string { return c.ln.Addr().String() }

func (c *connCounter) accepted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

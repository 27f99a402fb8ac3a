package acpi

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

// stubTransport reports one press, then waits for ctx and tells the test
// that it is returning.
type stubTransport struct{ returning chan struct{} }

func (t *stubTransport) kind() Transport { return Acpid }
func (t *stubTransport) close()          {}
func (t *stubTransport) run(ctx context.Context, w *watcher, _ int) error {
	w.press(ctx, press{t: Acpid, device: "STUB", at: time.Now()})
	<-ctx.Done()
	close(t.returning)
	return nil
}

// stubSource watches one stubTransport, and keeps what watch returned.
type stubSource struct {
	c    Config
	stub *stubTransport
	errc chan error // capacity 1
}

func (s *stubSource) Name() string { return Name }

func (s *stubSource) Watch(ctx context.Context, r *termsig.Run) error {
	err := s.c.watch(ctx, r, []transport{s.stub})
	s.errc <- err
	return err
}

// gate is a slog.Handler that holds the logging goroutine on a given
// message until the test opens the gate.
type gate struct {
	msg     string
	reached chan struct{}
	open    chan struct{}
}

func (g *gate) Enabled(context.Context, slog.Level) bool { return true }
func (g *gate) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g *gate) WithGroup(string) slog.Handler            { return g }
func (g *gate) Handle(_ context.Context, r slog.Record) error {
	if r.Message == g.msg {
		close(g.reached)
		<-g.open
	}
	return nil
}

// When ctx ends, the transports end too, so that Watch may find "every
// transport has ended" and "ctx is done" ready at once: it must take that
// for a stop, never for a failure. The gate holds Watch while both become
// ready, so that without the check each trial fails half the time.
func TestTransportsEndingAtStopIsAStop(t *testing.T) {
	for i := range 40 {
		g := &gate{msg: "acpi: power button pressed", reached: make(chan struct{}), open: make(chan struct{})}
		c := New(Config{Logger: slog.New(g)}).cfg.withDefaults()
		src := &stubSource{c: c, stub: &stubTransport{returning: make(chan struct{})}, errc: make(chan error, 1)}
		// C has room: the notice does not block Watch.
		n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(src)

		select {
		case <-g.reached:
		case <-time.After(5 * time.Second):
			t.Fatal("no press")
		}
		stopped := make(chan struct{})
		go func() { n.Stop(); close(stopped) }() // Stop waits for Watch, which the gate holds
		<-src.stub.returning
		close(g.open)
		select {
		case err := <-src.errc:
			require.ErrorIs(t, err, context.Canceled, "trial %d", i)
		case <-time.After(5 * time.Second):
			t.Fatal("Watch did not return")
		}
		<-stopped
	}
}

//go:build unix

package termsig_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/signal"
	"github.com/termsig/termsig/termsigtest"
)

// childEnv makes the test binary run drainChild instead of the tests.
const childEnv = "TERMSIG_TEST_DRAIN_CHILD"

// TestSecondSignalDoesNotKillTheDrain runs a program that drains after a
// platform notice (the power button, from a fake) and then gets systemd's
// SIGTERM in the middle of its drain, as on GCE. The SIGTERM must be a
// logged notice, not death by signal: the drain finishes and the program
// exits 0.
func TestSecondSignalDoesNotKillTheDrain(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	require.NoError(t, err, "the child must exit 0, not die of SIGTERM")
	assert.Contains(t, string(out), "drain finished after SIGTERM")
}

// drainChild is the program that TestSecondSignalDoesNotKillTheDrain runs
// (TestMain calls it in the child). It returns the exit status.
func drainChild() int {
	warned := make(chan slog.Record, 1)
	logger := slog.New(&recordTap{msg: "termsig: another imminent notice while draining", c: warned})
	button := termsigtest.NewFake("acpi")
	ctx, stop := termsig.Config{Logger: logger}.NotifyContext(context.Background(), button, signal.New())
	defer stop()

	button.Send(termsig.Notice{Kind: termsig.Terminate, Reason: "power button", Deadline: time.Now().Add(30 * time.Second)})
	<-ctx.Done()
	nt, _ := termsig.Cause(ctx)
	drain, cancel := nt.DrainContext(ctx, termsig.Drain{Margin: time.Second, Fallback: 10 * time.Second})
	defer cancel()

	// The drain runs; systemd's SIGTERM arrives in the middle of it.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		fmt.Println("kill:", err)
		return 1
	}
	select {
	case rec := <-warned:
		if rec.Level != slog.LevelWarn || drain.Err() != nil {
			fmt.Println("wrong level or drain cancelled:", rec.Level, drain.Err())
			return 1
		}
		fmt.Println("drain finished after SIGTERM:", testlog.Attr(rec, "notice"))
		return 0
	case <-drain.Done():
		fmt.Println("the SIGTERM was never logged")
		return 1
	}
}

// recordTap is a slog.Handler that hands the records with message msg to c.
type recordTap struct {
	msg string
	c   chan slog.Record
}

func (h *recordTap) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordTap) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordTap) WithGroup(string) slog.Handler            { return h }
func (h *recordTap) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.c <- r.Clone():
		default:
		}
	}
	return nil
}

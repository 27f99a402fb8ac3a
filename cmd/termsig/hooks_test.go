//go:build linux

package main

import (
	"log/slog"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds/imdstest"
)

func TestHookLeavingABackgroundProcessIsNotAFailure(t *testing.T) {
	r := start(t, nil, "hook", "--sources", "signal", "echo hi; sleep 100 &")
	waitLog(t, r, "termsig: watching", "")
	r.signal(syscall.SIGTERM)
	assert.Equal(t, 0, r.wait())
	assert.Contains(t, r.stderr.String(), "it left a background process, killed")
}

func TestAdviceHookTimesOutAfterGraceNotAtItsFarDeadline(t *testing.T) {
	srv, env := imdsEnv(t)
	srv.SetScheduledEvents(imdstest.ScheduledEvent{
		Code: "system-reboot", EventID: "instance-event-1", State: "active",
		NotBefore: time.Now().Add(14 * 24 * time.Hour),
	})
	r := start(t, env, "hook", "--sources", "imds,signal", "--follow", "--grace", "300ms",
		`if [ "$TERMSIG_SOURCE" = imds ]; then exec sleep 1000; fi`)
	waitLog(t, r, "hook killed at its timeout", "")
	r.signal(syscall.SIGTERM)
	assert.Equal(t, 1, r.wait(), "the advice hook failed; termsig ended on SIGTERM")
}

func TestManyNoticesOfOneEventDoNotQueueUp(t *testing.T) {
	// The hook runner itself: signals sent in a burst are merged by the
	// kernel, so a burst of SIGHUPs cannot make the backlog.
	var logs syncBuffer
	h := &hookRunner{
		o:      &options{exec: "sleep 0.2", grace: wait},
		log:    slog.New(slog.NewTextHandler(&logs, nil)),
		queues: map[eventKey]*hookQueue{},
	}
	start := time.Now()
	for i := range 20 {
		h.enqueue(termsig.Notice{Source: "signal", Kind: termsig.Reload, Event: "SIGHUP", Reason: strconv.Itoa(i)}, false)
	}
	h.enqueue(termsig.Notice{Source: "signal", Kind: termsig.Terminate, Event: "SIGTERM"}, true)
	h.wg.Wait()
	took := time.Since(start)
	done := strings.Count(logs.String(), "termsig: hook done")
	assert.LessOrEqual(t, done, 3, "the first SIGHUP, at most the latest one, and SIGTERM")
	assert.Contains(t, logs.String(), "replaces a hook not yet started")
	assert.Less(t, took, 2*time.Second, "twenty queued hooks would take 4 s")
	assert.False(t, h.failed())
}

func TestImminentHookIsKilledAtMaxDrainNotAtAFarDeadline(t *testing.T) {
	srv, env := imdsEnv(t)
	r := start(t, env, "hook", "--sources", "imds", "--imds-interval", "20ms", "--max-drain", "300ms", "exec sleep 1000")
	waitLog(t, r, "termsig: watching", "")
	srv.SetInterruption("terminate", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	assert.Equal(t, 1, r.wait(), "a hook killed at its timeout is a failure")
	assert.Contains(t, r.stderr.String(), "hook killed at its timeout")
}

//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
)

func TestIsSettled(t *testing.T) {
	var out strings.Builder
	st := []termsig.SourceStatus{
		{Name: "signal", State: termsig.StateRunning},
		{Name: "acpi", State: termsig.StateUnavailable},
		{Name: "imds", State: termsig.StateRunning},
	}
	r := &runner{
		tl:      newTimeline(&out),
		status:  func() []termsig.SourceStatus { return st },
		quick:   map[string]bool{"signal": true},
		started: time.Now(),
	}
	assert.False(t, r.isSettled(), "imds has not answered yet")
	st[2].Reported = time.Now()
	assert.True(t, r.isSettled())
	assert.Contains(t, out.String(), "sources ready")
	assert.True(t, r.isSettled(), "settled stays settled")

	out.Reset()
	st[2].Reported = time.Time{}
	r = &runner{tl: newTimeline(&out), status: r.status, quick: r.quick, started: time.Now().Add(-settleFor - time.Second)}
	assert.True(t, r.isSettled(), "it gives up waiting")
	assert.Contains(t, out.String(), "no answer yet from imds after 5s; claiming jobs anyway")

	assert.True(t, (&runner{}).isSettled(), "no status: nothing to wait for")
}

//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
)

func TestMayClaim(t *testing.T) {
	var out strings.Builder
	ready := make(chan struct{})
	r := &runner{tl: newTimeline(&out), ready: ready, paused: map[advice]termsig.Notice{}}
	assert.False(t, r.mayClaim(), "the sources have not had their first look")
	r.settle(true)
	assert.True(t, r.mayClaim())
	assert.Contains(t, out.String(), "sources ready")

	out.Reset()
	r = &runner{tl: newTimeline(&out), ready: ready, paused: map[advice]termsig.Notice{}}
	r.settle(false)
	assert.True(t, r.mayClaim(), "it gives up waiting")
	assert.Contains(t, out.String(), "sources not ready after 5s; claiming jobs anyway")

	r.paused[advice{"imds", "rebalance"}] = termsig.Notice{}
	assert.False(t, r.mayClaim(), "advice in force")
	delete(r.paused, advice{"imds", "rebalance"})
	r.reload = true
	assert.False(t, r.mayClaim(), "a reload waits for the current job")

	assert.True(t, (&runner{}).mayClaim(), "no ready channel: nothing to wait for")
}

func TestAdviceIsKeptPerEvent(t *testing.T) {
	var out strings.Builder
	r := &runner{tl: newTimeline(&out), paused: map[advice]termsig.Notice{}, cfg: config{onAdvice: "drain"}}
	r.advise(termsig.Notice{Source: "imds", Kind: termsig.Rebalance, Event: "rebalance"})
	r.advise(termsig.Notice{Source: "imds", Kind: termsig.Maintenance, Event: "scheduled/instance-event-1"})
	r.advise(termsig.Notice{Source: "imds", Kind: termsig.Cleared, Event: "scheduled/instance-event-1"})
	assert.False(t, r.mayClaim(), "the rebalance recommendation still holds")
	assert.Contains(t, out.String(), "other advice still holds")
	r.advise(termsig.Notice{Source: "gcemeta", Kind: termsig.Cleared, Event: "rebalance"})
	assert.False(t, r.mayClaim(), "a Cleared of another source's event clears nothing here")
	r.advise(termsig.Notice{Source: "imds", Kind: termsig.Cleared, Event: "rebalance"})
	assert.True(t, r.mayClaim())
	assert.Contains(t, out.String(), "claiming again")
}

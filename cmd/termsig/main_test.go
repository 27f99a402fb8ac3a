//go:build linux

package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKindsFilterDoesNotMakeWatchDeafToSIGTERM(t *testing.T) {
	for _, mode := range [][]string{{}, {"--exec", "true"}} {
		args := append([]string{"--sources", "signal", "--kinds", "maintenance"}, mode...)
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := start(t, nil, args...)
			waitLog(t, r, "watch: watching", "") // the Notifier started
			r.signal(syscall.SIGTERM)
			assert.Equal(t, 0, r.wait())
		})
	}
}

func TestNothingToWatchIsAnError(t *testing.T) {
	r := start(t, []string{"GCE_METADATA_HOST="}, "--sources", "gcemeta")
	assert.Equal(t, 1, r.wait())
	assert.Contains(t, r.stderr.String(), "no source can work here")
}

func TestNoCommandAfterDashesIsAUsageError(t *testing.T) {
	for _, args := range [][]string{{"--sources", "signal", "--"}, {"--", ""}} {
		r := start(t, nil, args...)
		assert.Equal(t, 2, r.wait(), args)
		assert.Contains(t, r.stderr.String(), "usage: watch")
	}
}

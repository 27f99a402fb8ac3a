//go:build linux

package main

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKindsFilterDoesNotMakeTermsigDeafToSIGTERM(t *testing.T) {
	for _, mode := range [][]string{{"print"}, {"hook"}} {
		args := append(mode, "--sources", "signal", "--kinds", "maintenance")
		if mode[0] == "hook" {
			args = append(args, "true")
		}
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := start(t, nil, args...)
			waitLog(t, r, "termsig: watching", "") // the Notifier started
			r.signal(syscall.SIGTERM)
			assert.Equal(t, 0, r.wait())
		})
	}
}

func TestNamedSourceThatDoesNotApplyIsAnErrorInEveryMode(t *testing.T) {
	exe, _ := os.Executable()
	for _, args := range [][]string{
		{"print", "--sources", "gcemeta"},
		{"hook", "--sources", "signal,gcemeta", "true"},
		{"supervise", "--sources", "gcemeta", "--", exe},
	} {
		r := start(t, []string{"GCE_METADATA_HOST=", childOn}, args...)
		assert.Equal(t, 1, r.wait(), args)
		assert.Contains(t, r.stderr.String(), "--sources gcemeta: it does not apply on this host: gcemeta: not on GCE", args)
		assert.NotContains(t, r.stderr.String(), "command started", args)
	}
}

func TestMisconfiguredSourceIsAnErrorInEveryMode(t *testing.T) {
	exe, _ := os.Executable()
	for _, args := range [][]string{{"print"}, {"hook", "true"}, {"supervise", "--", exe}} {
		r := start(t, []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT=not a url", childOn}, args...)
		assert.Equal(t, 1, r.wait(), args)
		assert.Contains(t, r.stderr.String(), "source imds is misconfigured: imds: AWS_EC2_METADATA_SERVICE_ENDPOINT", args)
		assert.NotContains(t, r.stderr.String(), "command started", args)
	}
}

func TestNoCommandAfterDashesIsAUsageError(t *testing.T) {
	for _, args := range [][]string{{"supervise", "--sources", "signal", "--"}, {"supervise", "--", ""}} {
		r := start(t, nil, args...)
		assert.Equal(t, 2, r.wait(), args)
		assert.Contains(t, r.stderr.String(), "usage: termsig supervise")
	}
}

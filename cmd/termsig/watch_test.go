//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi/acpitest"
	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/imds/imdstest"
)

const childOn = childEnv + "=1"

func imdsEnv(t *testing.T) (*imdstest.Server, []string) {
	srv := imdstest.NewServer()
	t.Cleanup(srv.Close)
	return srv, []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + srv.URL, "AWS_EC2_METADATA_DISABLED="}
}

func TestSpotInterruptionReachesTheCommandAsSIGTERM(t *testing.T) {
	srv, env := imdsEnv(t)
	r := start(t, append(env, childOn), append([]string{"supervise", "--sources", "imds", "--imds-interval", "20ms"}, child()...)...)
	r.expect("ready")
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	assert.Equal(t, "SIGTERM", r.expect("signal"))
	assert.Equal(t, 0, r.wait(), "the command exited 0 on SIGTERM, and so does termsig")
	assert.Contains(t, r.stderr.String(), "imminent notice: stopping the command")
}

func TestCommandIgnoringSIGTERMIsKilledWithItsGroupBeforeTheDeadline(t *testing.T) {
	srv, env := imdsEnv(t)
	r := start(t, append(env, childOn, "TERMSIG_TEST_ON_TERM=ignore", "TERMSIG_TEST_GRANDCHILD=1"),
		append([]string{"supervise", "--sources", "imds", "--imds-interval", "20ms", "--margin", "1s"}, child()...)...)
	grandchild, err := strconv.Atoi(r.expect("grandchild"))
	require.NoError(t, err)
	r.expect("ready")
	// IMDS gives the time to the second.
	deadline := time.Now().Add(2500 * time.Millisecond).Truncate(time.Second)
	srv.SetInterruption("terminate", deadline)
	assert.Equal(t, "SIGTERM", r.expect("signal"))
	assert.Equal(t, 128+9, r.wait(), "killed: 137, as a shell reports it")
	killed := time.Now()
	assert.False(t, killed.Before(deadline.Add(-time.Second)), "not before the deadline minus the margin")
	assert.True(t, killed.Before(deadline), "before the deadline: %v after it", killed.Sub(deadline))
	gone(t, grandchild, wait)
}

func TestSIGHUPPassesThroughAsSIGHUP(t *testing.T) {
	r := start(t, []string{childOn}, append([]string{"supervise", "--sources", "signal"}, child()...)...)
	r.expect("ready")
	r.signal(syscall.SIGHUP)
	assert.Equal(t, "SIGHUP", r.expect("signal"), "a reload, not a stop")
	r.signal(syscall.SIGUSR1)
	assert.Equal(t, "SIGUSR1", r.expect("signal"))
	r.signal(syscall.SIGTERM)
	assert.Equal(t, "SIGTERM", r.expect("signal"))
	assert.Equal(t, 0, r.wait())
}

func TestExitStatusIsTheCommands(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		term bool
		want int
	}{
		{"exit 0", []string{"TERMSIG_TEST_EXIT=0"}, false, 0},
		{"exit 7", []string{"TERMSIG_TEST_EXIT=7"}, false, 7},
		{"death by SIGTERM", []string{"TERMSIG_TEST_ON_TERM=die"}, true, 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, append(tc.env, childOn), append([]string{"supervise", "--sources", "signal"}, child()...)...)
			if tc.term {
				r.expect("ready")
				r.signal(syscall.SIGTERM)
			}
			assert.Equal(t, tc.want, r.wait())
		})
	}
	t.Run("not found", func(t *testing.T) {
		r := start(t, nil, "supervise", "--sources", "signal", "--", "/nonexistent/command")
		assert.Equal(t, 127, r.wait())
		assert.Contains(t, r.stderr.String(), "cannot start the command")
	})
}

func TestJSONLinesParseAsNotices(t *testing.T) {
	srv := gcemetatest.NewServer()
	defer srv.Close()
	r := start(t, []string{"GCE_METADATA_HOST=" + srv.Host()}, "print", "--sources", "gcemeta")
	srv.Set("instance/maintenance-event", "MIGRATE_ON_HOST_MAINTENANCE")
	srv.Set("instance/preempted", "TRUE")
	assert.Equal(t, 0, r.wait(), "exits after the first imminent notice")
	var got []termsig.Notice
	for _, line := range strings.Split(strings.TrimSpace(r.stdout.String()), "\n") {
		var nt termsig.Notice
		require.NoError(t, json.Unmarshal([]byte(line), &nt), line)
		got = append(got, nt)
	}
	require.NotEmpty(t, got)
	last := got[len(got)-1]
	assert.Equal(t, termsig.Terminate, last.Kind)
	assert.Equal(t, "gcemeta", last.Source)
	assert.Equal(t, "preempted", last.Event)
	assert.False(t, last.Deadline.IsZero())
}

func TestTextFormatAndKindsFilter(t *testing.T) {
	acpid, err := acpitest.NewAcpid()
	require.NoError(t, err)
	defer acpid.Close()
	r := start(t, nil, "print", "--sources", "acpi", "--acpid-socket", acpid.Path(), "--format", "text", "--kinds", "terminate")
	require.NoError(t, acpid.WaitClients(t.Context(), 1))
	_, err = acpid.PressPowerButton()
	require.NoError(t, err)
	assert.Equal(t, 0, r.wait())
	assert.Regexp(t, `^acpi: terminate \(power button `, r.stdout.String())
}

func TestHookGetsTheNoticeAndIsKilledAtItsTimeout(t *testing.T) {
	acpid, err := acpitest.NewAcpid()
	require.NoError(t, err)
	defer acpid.Close()
	dir := t.TempDir()
	hook := `env | grep ^TERMSIG_ | sort > ` + filepath.Join(dir, "env") + `; cat > ` + filepath.Join(dir, "stdin") + `; echo said something; sleep 1000`
	r := start(t, nil, "hook", "--sources", "acpi", "--acpid-socket", acpid.Path(), "--hook-timeout", "300ms", hook)
	require.NoError(t, acpid.WaitClients(t.Context(), 1))
	pressed := time.Now()
	_, err = acpid.PressPowerButton()
	require.NoError(t, err)
	assert.Equal(t, 1, r.wait(), "a hook that timed out is a failure")
	assert.Less(t, time.Since(pressed), 3*time.Second, "killed at its timeout, not after sleep 1000")
	assert.Contains(t, r.stderr.String(), "hook killed at its timeout")
	assert.Contains(t, r.stderr.String(), "said something", "its output is logged")

	env, err := os.ReadFile(filepath.Join(dir, "env"))
	require.NoError(t, err)
	assert.Contains(t, string(env), "TERMSIG_KIND=terminate\n")
	assert.Contains(t, string(env), "TERMSIG_SOURCE=acpi\n")
	assert.Contains(t, string(env), "TERMSIG_EVENT=power-button\n")
	assert.Contains(t, string(env), "TERMSIG_DEADLINE=\n")
	stdin, err := os.ReadFile(filepath.Join(dir, "stdin"))
	require.NoError(t, err)
	var nt termsig.Notice
	require.NoError(t, json.Unmarshal(stdin, &nt))
	assert.Equal(t, "power-button", nt.Event)
}

func TestBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"print", "--no-such-flag"}, "flag provided but not defined"},
		{[]string{"print", "--format", "xml"}, "--format must be json or text"},
		{[]string{"print", "--kinds", "terminate,explode"}, `--kinds: termsig: unknown kind "explode"`},
		{[]string{"print", "--sources", "imds,nope"}, `unknown source "nope"`},
		{[]string{"print", "--sources", "signal,signal"}, `"signal" named twice`},
		{[]string{"print", "true"}, "takes no arguments"},
		{[]string{"print", "--signal", "TERM"}, "flag provided but not defined: -signal"},
		{[]string{"supervise", "--signal", "SIGNOPE", "--", "true"}, `--signal: unknown signal "SIGNOPE"`},
		{[]string{"supervise", "--finish-signal", "SIGNOPE", "--", "true"}, `--finish-signal: unknown signal "SIGNOPE"`},
		{[]string{"supervise", "--max-hold", "0", "--", "true"}, "--max-hold must be positive"},
		{[]string{"hook", "--max-hold", "1h", "true"}, "flag provided but not defined: -max-hold"},
		{[]string{"print", "--finish-signal", "QUIT"}, "flag provided but not defined: -finish-signal"},
		{[]string{"supervise", "--exec", "true", "--", "true"}, "flag provided but not defined: -exec"},
		{[]string{"supervise", "--follow", "--", "true"}, "flag provided but not defined: -follow"},
		{[]string{"supervise", "--grace", "0", "true"}, "--grace and --max-drain must be positive"},
		{[]string{"hook", "--max-drain", "0", "true"}, "--grace and --max-drain must be positive"},
		{[]string{"hook", "--margin", "-1s", "true"}, "must not be negative"},
		{[]string{"hook"}, "no shell command"},
		{[]string{"hook", " "}, "the shell command is empty"},
		{[]string{"hook", "echo", "hi"}, "takes one shell command, not 2 arguments: quote it"},
		{[]string{"supervise"}, "no command to supervise"},
		{[]string{"supervise", "--sources", "--"}, "no command to supervise"},
		{[]string{"hook", "true", "--follow"}, `flags come before the shell command, not after it ("--follow")`},
		{[]string{"print", "--imds-interval", "1ns"}, "--imds-interval must be at least 10ms"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := start(t, nil, tc.args...)
			assert.Equal(t, 2, r.wait())
			assert.Contains(t, r.stderr.String(), tc.want)
			assert.Contains(t, r.stderr.String(), "usage: termsig "+tc.args[0])
		})
	}
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	for _, args := range [][]string{{}, {"--sources", "signal"}, {"watch"}} {
		r := start(t, nil, args...)
		assert.Equal(t, 2, r.wait(), args)
		assert.Contains(t, r.stderr.String(), "usage: termsig COMMAND", args)
		assert.Empty(t, r.stdout.String(), args)
	}
}

func TestHelpExitsZeroWithTheUsageOnStdout(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "termsig supervise [flags] -- CMD ARGS..."},
		{[]string{"--help"}, "termsig hook      [flags] 'SHELL COMMAND'"},
		{[]string{"help"}, "termsig fake      imds|gce|azure"},
		{[]string{"supervise", "-h"}, "usage: termsig supervise [--signal SIG]"},
		{[]string{"supervise", "--help"}, "-max-drain duration"},
		{[]string{"supervise", "--help"}, "-finish-signal string"},
		{[]string{"supervise", "--help"}, "-max-hold duration"},
		{[]string{"-h"}, "(--finish-signal), waits for it up to --max-hold"},
		{[]string{"hook", "-h"}, "-hook-timeout duration"},
		{[]string{"print", "-h"}, "-format string"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := start(t, nil, tc.args...)
			assert.Equal(t, 0, r.wait())
			assert.Contains(t, r.stdout.String(), tc.want)
			assert.Empty(t, r.stderr.String())
		})
	}
	r := start(t, nil, "supervise", "-h")
	r.wait()
	assert.Contains(t, r.stdout.String(), "-- CMD ARGS...")
}

func TestVersionTakesNoArguments(t *testing.T) {
	r := start(t, nil, "version", "--bogus")
	assert.Equal(t, 2, r.wait())
	assert.Contains(t, r.stderr.String(), `termsig version: takes no arguments, not "--bogus"`)
}

func TestVersionNamesTheBinary(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := start(t, nil, args...)
		assert.Equal(t, 0, r.wait())
		assert.Regexp(t, `^termsig \S+.* go1\.\S+ linux/\w+\n$`, r.stdout.String())
	}
}

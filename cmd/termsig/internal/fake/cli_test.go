package fake_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/cmd/termsig/internal/fake"
)

// main runs Main to its end with args; a bad command line needs no context
// to end.
func main(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	out, errs := newOutput(), newOutput()
	code = fake.Main(context.Background(), args, out, errs)
	return code, out.String(), errs.String()
}

// A bad command line exits 2 with a message that names what is wrong and
// the usage, and serves nothing.
func TestBadCommandLineExitsTwoWithTheUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string // in the message
	}{
		{"no fake", nil, "which fake? imds, gce, azure, alibaba or tencent"},
		{"unknown fake", []string{"aws"}, `no fake "aws"`},
		{"unknown flag", []string{"imds", "--bogus"}, "no flag --bogus"},
		{"flag of another fake", []string{"imds", "--preempt-in", "1s"}, "no flag --preempt-in"},
		{"an argument", []string{"gce", "now"}, `takes no arguments, not "now"`},
		{"negative duration", []string{"imds", "--spot-in", "-1s"}, `--spot-in "-1s": must not be negative`},
		{"negative notice", []string{"azure", "--event-in", "0s", "--notice", "-30s"}, `--notice "-30s": must not be negative`},
		{"not a duration", []string{"gce", "--preempt-in", "10"}, `--preempt-in "10": not a duration`},
		{"no value", []string{"imds", "--spot-in"}, "--spot-in needs a value"},
		{"unknown action", []string{"imds", "--spot-in", "1s", "--action", "reboot"}, `--action "reboot": not one of terminate, stop, hibernate`},
		{"action without event", []string{"imds", "--action", "stop"}, "--action without --spot-in"},
		{"notice without event", []string{"imds", "--notice", "1m"}, "--notice without --spot-in"},
		{"unknown maintenance value", []string{"gce", "--maintenance-in", "1s", "--maintenance", "FALSE"}, `--maintenance "FALSE": not one of MIGRATE_ON_HOST_MAINTENANCE, TERMINATE_ON_HOST_MAINTENANCE`},
		{"maintenance value without event", []string{"gce", "--maintenance", "TERMINATE_ON_HOST_MAINTENANCE"}, "--maintenance without --maintenance-in"},
		{"unknown type", []string{"azure", "--event-in", "1s", "--type", "Shutdown"}, `--type "Shutdown": not one of Preempt, Reboot, Redeploy, Freeze, Terminate`},
		{"type without event", []string{"azure", "--type", "Reboot"}, "--type without --event-in"},
		{"empty VM name", []string{"azure", "--vm", ""}, `--vm "": a VM has a name`},
		{"VM name Azure does not give", []string{"azure", "--vm", "web 1"}, `--vm "web 1": not a name Azure gives a VM`},
		{"bad address", []string{"imds", "--listen", "1338"}, `--listen "1338": not a host:port, such as 127.0.0.1:1338`},
		{"notice without a spot", []string{"alibaba", "--notice", "1m"}, "--notice without --spot-in"},
		{"negative spot", []string{"tencent", "--spot-in", "-1s"}, `--spot-in "-1s": must not be negative`},
		{"no hardening mode at tencent", []string{"tencent", "--hardened"}, "no flag --hardened"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := main(t, tc.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
			assert.Contains(t, stderr, "[flags]", "the usage follows")
		})
	}
}

// -h, of termsig fake or of one fake, prints the usage on stdout and
// exits 0.
func TestHelpPrintsTheUsageOnStdout(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"imds", "-h"}, {"gce", "--help"}, {"azure", "-h", "--bogus"}} {
		code, stdout, stderr := main(t, args...)
		assert.Equal(t, 0, code, args)
		assert.Contains(t, stdout, "usage: termsig fake imds|gce|azure|alibaba|tencent [flags]", args)
		assert.Empty(t, stderr, args)
	}
	_, stdout, _ := main(t, "-h")
	assert.Equal(t, fake.Usage, stdout)
	_, stdout, _ = main(t, "gce", "-h")
	assert.Contains(t, stdout, "--preempt-in")
	assert.NotContains(t, stdout, "--spot-in", "a fake's help is its own")
}

// A port in use is an error, exit 1, that suggests --listen.
func TestPortInUseExitsOneAndSuggestsListen(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	for _, name := range []string{"imds", "gce", "azure", "alibaba", "tencent"} {
		code, stdout, stderr := main(t, name, "--listen", ln.Addr().String())
		assert.Equal(t, 1, code, name)
		assert.Empty(t, stdout, name)
		assert.Contains(t, stderr, "termsig fake "+name+": listen tcp "+ln.Addr().String(), name)
		assert.Contains(t, stderr, "Choose another address with --listen", name)
	}
}

// A context that has ended already ends Main at once, with 0, after the
// ready line.
func TestEndedContextEndsMainAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, errs := newOutput(), newOutput()
	assert.Equal(t, 0, fake.Main(ctx, []string{"gce", "--listen", "127.0.0.1:0", "--preempt-in", "1h"}, out, errs))
	assert.Contains(t, out.String(), "termsig fake gce: serving on http://127.0.0.1:")
	assert.Empty(t, errs.String())
}

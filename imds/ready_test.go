package imds_test

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/termsigtest"
)

var quietLog = termsig.Config{Logger: slog.New(slog.DiscardHandler)}

// waitReady waits for n.Ready, failing the test after wait.
func waitReady(t *testing.T, n *termsig.Notifier) {
	t.Helper()
	select {
	case <-n.Ready():
	case <-time.After(wait):
		t.Fatal("Ready not closed")
	}
}

// The source's first look needs the network: it has no Traits, so that
// termsig.New does not wait for it (Notifier.Ready does, see below).
func TestFirstLookIsRemote(t *testing.T) {
	_, ok := termsig.Source(imds.New(imds.Config{})).(termsig.Describer)
	assert.False(t, ok, "imds.Source has a Traits method")
}

// Ready closes once every path has answered once, not before.
func TestReadyAfterFirstPolls(t *testing.T) {
	srv := imdstest.NewServer()
	defer srv.Close()
	const delay = 50 * time.Millisecond
	srv.Inject(termsigtest.Fault{Delay: delay}) // token and each path: Ready cannot come sooner
	start := time.Now()
	n := quietLog.New(imds.New(fastConfig(srv)))
	defer n.Stop()
	waitReady(t, n)
	assert.GreaterOrEqual(t, time.Since(start), delay)
	for _, p := range []string{imdstest.PathInstanceAction, imdstest.PathLifecycle, imdstest.PathRebalance, imdstest.PathScheduled} {
		assert.GreaterOrEqual(t, srv.Requests(p), 1, "%s answered before Ready", p)
	}
	st := n.Status()[0]
	assert.NoError(t, st.Err)
	assert.False(t, st.LastHeard.IsZero(), "the first answers were reported")
}

// When IMDS does not answer, New returns at once and Ready closes only
// once the first poll has timed out.
func TestReadyWhenIMDSHangs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint func(t *testing.T) string
	}{
		{"hung fake", func(t *testing.T) string {
			srv := imdstest.NewServer()
			t.Cleanup(srv.Close)
			srv.Inject(termsigtest.Fault{Hang: true})
			return srv.URL
		}},
		{"silent listener", func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts (in the kernel), never answers
			require.NoError(t, err)
			t.Cleanup(func() { ln.Close() })
			return "http://" + ln.Addr().String()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := *intervals(imds.Config{
				Endpoint: tc.endpoint(t), Interval: 10 * time.Millisecond, AdvisoryInterval: 10 * time.Millisecond,
				RequestTimeout: 100 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
			}, imds.DefaultFastInterval, 10*time.Millisecond)
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
				start := time.Now()
				n := quietLog.New(imds.New(cfg))
				took := time.Since(start)
				defer n.Stop()
				select {
				case <-n.Ready():
					t.Fatal("Ready closed before any poll failed")
				default:
				}
				waitReady(t, n)
				assert.GreaterOrEqual(t, time.Since(start), cfg.RequestTimeout)
				assert.ErrorContains(t, n.Status()[0].Err, "no answer within 100ms")
				return took
			})
		})
	}
}

// A source that cannot work here is ready too: the Notifier closes Ready
// when Watch returns.
func TestReadyWhenUnavailable(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "")
	logs := testlog.New()
	n := termsig.Config{Logger: logs.Logger()}.New(imds.New(imds.Config{Root: t.TempDir()}))
	defer n.Stop()
	waitReady(t, n)
	// Ready may close a moment before Status records how Watch ended.
	logs.WaitFor(t, "termsig: source unavailable", 1)
	assert.Equal(t, termsig.StateUnavailable, n.Status()[0].State)
}

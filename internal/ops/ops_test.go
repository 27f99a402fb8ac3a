package ops_test

import (
	"bytes"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
)

func TestOneAddressServesMetricsAndBothProbes(t *testing.T) {
	s := start(t, ops.Config{MetricsAddr: "127.0.0.1:0", ProbeAddr: "127.0.0.1:0"})
	require.NotEmpty(t, s.MetricsAddr())
	assert.Equal(t, s.MetricsAddr(), s.ProbeAddr(), "one listener")
	for path, want := range map[string]int{"/metrics": 200, "/healthz": 200, "/readyz": 503, "/": 404} {
		code, _ := get(t, s.MetricsAddr(), path)
		assert.Equal(t, want, code, path)
	}
}

func TestTwoAddressesServeTheirOwnPaths(t *testing.T) {
	s := start(t, ops.Config{MetricsAddr: "127.0.0.1:0", ProbeAddr: "localhost:0"})
	require.NotEqual(t, s.MetricsAddr(), s.ProbeAddr())
	for _, tc := range []struct {
		addr, path string
		want       int
	}{
		{s.MetricsAddr(), "/metrics", 200},
		{s.MetricsAddr(), "/healthz", 404},
		{s.ProbeAddr(), "/healthz", 200},
		{s.ProbeAddr(), "/readyz", 503},
		{s.ProbeAddr(), "/metrics", 404},
	} {
		code, _ := get(t, tc.addr, tc.path)
		assert.Equal(t, tc.want, code, "%s%s", tc.addr, tc.path)
	}
}

func TestStartLogsTheBoundAddress(t *testing.T) {
	var logs bytes.Buffer
	s := start(t, ops.Config{Name: "termsig", MetricsAddr: "127.0.0.1:0", ProbeAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	assert.Contains(t, logs.String(), `msg="termsig: serving metrics and health probes" addr=`+s.MetricsAddr())
}

func TestABindErrorIsAnErrorNamingTheFlag(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	inUse := busy.Addr().String()
	for _, tc := range []struct {
		name string
		cfg  ops.Config
		want string
		is   error
	}{
		{"metrics in use", ops.Config{MetricsAddr: inUse}, "--metrics-bind-address " + inUse + ": ", syscall.EADDRINUSE},
		{"probes in use", ops.Config{MetricsAddr: "127.0.0.1:0", ProbeAddr: inUse}, "--health-probe-bind-address " + inUse + ": ", syscall.EADDRINUSE},
		{"both in use", ops.Config{MetricsAddr: inUse, ProbeAddr: inUse}, "--metrics-bind-address " + inUse + ": ", syscall.EADDRINUSE},
		{"no port", ops.Config{ProbeAddr: "127.0.0.1"}, "--health-probe-bind-address 127.0.0.1: listen tcp: address 127.0.0.1: missing port in address", nil},
		{"not a port", ops.Config{MetricsAddr: "127.0.0.1:http-metrics"}, "--metrics-bind-address 127.0.0.1:http-metrics: ", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ops.Start(tc.cfg)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tc.want)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
		})
	}
}

func TestABindErrorLeavesNothingListening(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := free.Addr().String()
	require.NoError(t, free.Close())
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()

	_, err = ops.Start(ops.Config{MetricsAddr: addr, ProbeAddr: busy.Addr().String()})
	require.Error(t, err)
	again, err := net.Listen("tcp", addr)
	require.NoError(t, err, "the metrics listener bound first was closed")
	again.Close()
}

func TestCloseStopsServingAndMayBeCalledAgain(t *testing.T) {
	s, err := ops.Start(ops.Config{MetricsAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	code, _ := get(t, s.MetricsAddr(), "/metrics")
	require.Equal(t, http.StatusOK, code)
	s.Close()
	s.Close()
	_, err = client.Get("http://" + s.MetricsAddr() + "/metrics")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	// goleak (TestMain): no goroutine of the Server is left.
}

func TestANilServerDoesNothing(t *testing.T) {
	var s *ops.Server
	nt := termsig.Notice{Source: "imds", Kind: termsig.Terminate}
	s.Noticed(nt)
	s.Acted(nt)
	s.Tick()
	s.Watch(nil)
	s.AddReadyCheck("node", func() error { return nil })
	assert.Nil(t, s.Heartbeat())
	assert.Nil(t, s.Registerer())
	assert.Empty(t, s.MetricsAddr())
	assert.Empty(t, s.ProbeAddr())
	s.Close()
}

func TestRegisterFlagsUsesControllerRuntimesNames(t *testing.T) {
	var cfg ops.Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--metrics-bind-address", ":9090", "--health-probe-bind-address=:8081"}))
	assert.Equal(t, ":9090", cfg.MetricsAddr)
	assert.Equal(t, ":8081", cfg.ProbeAddr)
}

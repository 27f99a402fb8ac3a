package imds_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/internal/testlog"
)

// A Config that cannot work fails the source at once, with one message
// that names the field, on any host: here, one that is not EC2.
func TestConfigValidation(t *testing.T) {
	const ok = "http://127.0.0.1:1"
	const notURL = " is not an absolute http or https URL with a host"
	for _, tc := range []struct {
		name string
		cfg  imds.Config
		env  string // AWS_EC2_METADATA_SERVICE_ENDPOINT
		want string
	}{
		{name: "endpoint without scheme", cfg: imds.Config{Endpoint: "169.254.169.254"}, want: `imds: Config.Endpoint "169.254.169.254"` + notURL},
		{name: "endpoint ftp", cfg: imds.Config{Endpoint: "ftp://x"}, want: `imds: Config.Endpoint "ftp://x"` + notURL},
		{name: "endpoint without host", cfg: imds.Config{Endpoint: "http://"}, want: `imds: Config.Endpoint "http://"` + notURL},
		{name: "endpoint with port only", cfg: imds.Config{Endpoint: "http://:1338"}, want: `imds: Config.Endpoint "http://:1338"` + notURL},
		{name: "endpoint unparsable", cfg: imds.Config{Endpoint: ":::"}, want: `imds: Config.Endpoint ":::"` + notURL},
		{name: "endpoint from env", env: "169.254.169.254", want: `imds: AWS_EC2_METADATA_SERVICE_ENDPOINT "169.254.169.254"` + notURL},
		{name: "negative interval", cfg: imds.Config{Endpoint: ok, Interval: -time.Second}, want: "imds: Config.Interval is negative (-1s)"},
		{name: "negative advisory interval", cfg: imds.Config{Endpoint: ok, AdvisoryInterval: -1}, want: "imds: Config.AdvisoryInterval is negative (-1ns)"},
		{name: "negative request timeout", cfg: imds.Config{Endpoint: ok, RequestTimeout: -time.Millisecond}, want: "imds: Config.RequestTimeout is negative (-1ms)"},
		{name: "negative max backoff", cfg: imds.Config{Endpoint: ok, MaxBackoff: -time.Minute}, want: "imds: Config.MaxBackoff is negative (-1m0s)"},
		{name: "interval below floor", cfg: imds.Config{Endpoint: ok, Interval: imds.FloorInterval - 1}, want: "imds: Config.Interval 9.999999ms is below FloorInterval (10ms): it would hammer the metadata service"},
		{name: "advisory interval below floor", cfg: imds.Config{Endpoint: ok, AdvisoryInterval: time.Millisecond}, want: "imds: Config.AdvisoryInterval 1ms is below FloorInterval (10ms): it would hammer the metadata service"},
		{name: "fast interval below floor", cfg: imds.WithFastInterval(imds.Config{Endpoint: ok}, time.Millisecond), want: "imds: Config.fastInterval 1ms is below FloorInterval (10ms): it would hammer the metadata service"},
		{name: "negative maintenance interval", cfg: imds.WithMaintenanceInterval(imds.Config{Endpoint: ok}, -time.Second), want: "imds: Config.maintenanceInterval is negative (-1s)"},
		{name: "unknown events", cfg: imds.Config{Endpoint: ok, Events: 0x30}, want: "imds: Config.Events 0x30 selects no known event (AllEvents is 0xf)"},
		{name: "events with unknown bits", cfg: imds.Config{Endpoint: ok, Events: imds.SpotInterruption | 0x80}, want: "imds: Config.Events 0x81 has bits outside AllEvents (0xf)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", tc.env)
			t.Setenv("AWS_EC2_METADATA_DISABLED", "")
			tc.cfg.Root = t.TempDir()
			src := imds.New(tc.cfg) // New never fails

			err := src.Available()
			require.EqualError(t, err, tc.want)
			assert.NotErrorIs(t, err, termsig.ErrUnavailable, "a mistake must not pass for another host")

			logs := testlog.New()
			n := termsig.Config{Logger: logs.Logger()}.New(src)
			defer n.Stop()
			rec := logs.WaitFor(t, "termsig: source failed", 1)
			assert.Equal(t, tc.want, testlog.Attr(rec, "err"))
			st := n.Status()[0]
			assert.Equal(t, termsig.StateFailed, st.State)
			assert.EqualError(t, st.Err, tc.want)
			select {
			case <-n.Ready():
			case <-time.After(wait):
				t.Fatal("Ready not closed after Watch failed")
			}
		})
	}
}

// What the checks accept: the floor itself, zero for the defaults, an
// endpoint in the environment that the source does not use.
func TestConfigValidationAccepts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     imds.Config
		env     map[string]string
		unavail bool
	}{
		{name: "at the floor", cfg: *intervals(imds.Config{Endpoint: "http://127.0.0.1:1", Interval: imds.FloorInterval, AdvisoryInterval: imds.FloorInterval}, imds.FloorInterval, imds.FloorInterval)},
		{name: "zero means default", cfg: imds.Config{Endpoint: "https://[fd00:ec2::254]"}},
		{name: "upper-case scheme", cfg: imds.Config{Endpoint: "HTTP://169.254.169.254"}},
		{name: "env endpoint overridden by Endpoint", cfg: imds.Config{Endpoint: "http://127.0.0.1:1"}, env: map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": "ftp://x"}},
		{name: "env endpoint unused when disabled", env: map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": "ftp://x", "AWS_EC2_METADATA_DISABLED": "true"}, unavail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "")
			t.Setenv("AWS_EC2_METADATA_DISABLED", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tc.cfg.Root = t.TempDir()
			tc.cfg.Logger = slog.New(slog.DiscardHandler)
			err := imds.New(tc.cfg).Available()
			if tc.unavail {
				assert.ErrorIs(t, err, termsig.ErrUnavailable)
				return
			}
			assert.NoError(t, err)
		})
	}
}

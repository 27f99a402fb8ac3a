package tencent_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/spotpoll/spotpolltest"
	"github.com/termsig/termsig/internal/watchtest"
	"github.com/termsig/termsig/tencent"
)

// The source applies on a CVM instance, recognised by its firmware's
// product name, or where an endpoint is configured; elsewhere it is
// unavailable, and says what it read.
func TestAvailable(t *testing.T) {
	cvm := map[string]string{"sys_vendor": "Tencent Cloud", "product_name": "Tencent Cloud CVM"}
	kvm := map[string]string{"sys_vendor": "QEMU", "product_name": "Standard PC (i440FX + PIIX, 1996)"}
	for _, tc := range []struct {
		name string
		dmi  map[string]string
		cfg  tencent.Config
		env  string
		want string // "": available
	}{
		{name: "cvm", dmi: cvm},
		{name: "kvm", dmi: kvm, want: `tencent: not a CVM instance (DMI sys_vendor "QEMU", product_name "Standard PC (i440FX + PIIX, 1996)"), and neither Config.Endpoint nor TENCENT_METADATA_ENDPOINT is set: ` + termsig.ErrUnavailable.Error()},
		{name: "endpoint", dmi: kvm, cfg: tencent.Config{Endpoint: "http://metadata.tencentyun.com"}},
		{name: "env", dmi: kvm, env: "http://127.0.0.1:1342"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tencent.EndpointEnv, tc.env)
			cfg := tc.cfg
			cfg.Root = spotpolltest.FakeRoot(t, tc.dmi)
			err := tencent.New(cfg).Available()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, termsig.ErrUnavailable)
			assert.EqualError(t, err, tc.want)
		})
	}
}

// A Config that cannot work is an error that names the field, on any
// host, and not ErrUnavailable: Watch fails at once with it.
func TestAConfigThatCannotWorkFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  tencent.Config
		env  string
		want string
	}{
		{"no scheme", tencent.Config{Endpoint: "169.254.0.23"}, "", `tencent: Config.Endpoint "169.254.0.23" is not an absolute http or https URL with a host and no path, query or fragment`},
		{"env with a path", tencent.Config{}, "http://169.254.0.23/latest/meta-data", `tencent: TENCENT_METADATA_ENDPOINT "http://169.254.0.23/latest/meta-data" is not an absolute http or https URL with a host and no path, query or fragment`},
		{"interval below floor", tencent.Config{Interval: time.Millisecond}, "", "tencent: Config.Interval 1ms is below FloorInterval (10ms): it would hammer the metadata service"},
		{"negative timeout", tencent.Config{RequestTimeout: -time.Second}, "", "tencent: Config.RequestTimeout is negative (-1s)"},
		{"negative backoff", tencent.Config{MaxBackoff: -time.Second}, "", "tencent: Config.MaxBackoff is negative (-1s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tencent.EndpointEnv, tc.env)
			cfg := tc.cfg
			cfg.Root = t.TempDir() // not a CVM instance: the mistake shows anyway
			src := tencent.New(cfg)
			err := src.Available()
			assert.EqualError(t, err, tc.want)
			assert.NotErrorIs(t, err, termsig.ErrUnavailable)
			n, returned := watchtest.Watch(t, quiet, src)
			assert.EqualError(t, watchtest.Returned(t, returned), tc.want)
			n.Stop()
			assert.Equal(t, termsig.StateFailed, n.Status()[0].State)
		})
	}
}

// The default endpoint is the service's address, not its name: a poll
// needs no DNS lookup.
func TestTheDefaultEndpointIsAnAddress(t *testing.T) {
	assert.Equal(t, "http://169.254.0.23", tencent.DefaultEndpoint)
}

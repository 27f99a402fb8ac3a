package alibaba_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/internal/spotpoll/spotpolltest"
	"github.com/termsig/termsig/internal/watchtest"
)

// The source applies on an ECS instance, recognised by its firmware's
// product name, or where an endpoint is configured; elsewhere it is
// unavailable, and says what it read.
func TestAvailable(t *testing.T) {
	ecs := map[string]string{"sys_vendor": "Alibaba Cloud", "product_name": "Alibaba Cloud ECS"}
	kvm := map[string]string{"sys_vendor": "QEMU", "product_name": "Standard PC (i440FX + PIIX, 1996)"}
	for _, tc := range []struct {
		name string
		dmi  map[string]string
		cfg  alibaba.Config
		env  string
		want string // "": available
	}{
		{name: "ecs", dmi: ecs},
		{name: "kvm", dmi: kvm, want: `alibaba: not an ECS instance (DMI sys_vendor "QEMU", product_name "Standard PC (i440FX + PIIX, 1996)"), and neither Config.Endpoint nor ALIBABA_METADATA_ENDPOINT is set: ` + termsig.ErrUnavailable.Error()},
		{name: "no dmi", want: "alibaba: not an ECS instance (no DMI strings), and neither Config.Endpoint nor ALIBABA_METADATA_ENDPOINT is set: " + termsig.ErrUnavailable.Error()},
		{name: "endpoint", dmi: kvm, cfg: alibaba.Config{Endpoint: "http://127.0.0.1:1341"}},
		{name: "env", dmi: kvm, env: "http://127.0.0.1:1341/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(alibaba.EndpointEnv, tc.env)
			cfg := tc.cfg
			cfg.Root = spotpolltest.FakeRoot(t, tc.dmi)
			err := alibaba.New(cfg).Available()
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
// host, and not ErrUnavailable: Watch fails at once with it, and the
// source shows as failed.
func TestAConfigThatCannotWorkFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  alibaba.Config
		env  string
		want string
	}{
		{"no scheme", alibaba.Config{Endpoint: "100.100.100.200"}, "", `alibaba: Config.Endpoint "100.100.100.200" is not an absolute http or https URL with a host and no path, query or fragment`},
		{"a path", alibaba.Config{Endpoint: "http://100.100.100.200/latest"}, "", `alibaba: Config.Endpoint "http://100.100.100.200/latest" is not an absolute http or https URL with a host and no path, query or fragment`},
		{"a query", alibaba.Config{Endpoint: "http://127.0.0.1:1?x"}, "", `alibaba: Config.Endpoint "http://127.0.0.1:1?x" is not an absolute http or https URL with a host and no path, query or fragment`},
		{"user", alibaba.Config{Endpoint: "http://u:p@127.0.0.1:1"}, "", `alibaba: Config.Endpoint "http://u:p@127.0.0.1:1" is not an absolute http or https URL with a host and no path, query or fragment`},
		{"env", alibaba.Config{}, "ftp://x", `alibaba: ALIBABA_METADATA_ENDPOINT "ftp://x" is not an absolute http or https URL with a host and no path, query or fragment`},
		{"interval below floor", alibaba.Config{Interval: time.Millisecond}, "", "alibaba: Config.Interval 1ms is below FloorInterval (10ms): it would hammer the metadata service"},
		{"negative interval", alibaba.Config{Interval: -time.Second}, "", "alibaba: Config.Interval is negative (-1s)"},
		{"negative timeout", alibaba.Config{RequestTimeout: -time.Second}, "", "alibaba: Config.RequestTimeout is negative (-1s)"},
		{"negative backoff", alibaba.Config{MaxBackoff: -time.Second}, "", "alibaba: Config.MaxBackoff is negative (-1s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(alibaba.EndpointEnv, tc.env)
			cfg := tc.cfg
			cfg.Root = t.TempDir() // not an ECS instance: the mistake shows anyway
			src := alibaba.New(cfg)
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

// Off Alibaba Cloud, Watch returns ErrUnavailable at once, and neither it
// nor Available touches the network: here the default endpoint stands for
// a listener that counts what dials it.
func TestOffAlibabaNothingIsDialled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dialled := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			dialled <- struct{}{}
		}
	}()
	t.Setenv(alibaba.EndpointEnv, "")
	src := alibaba.New(alibaba.Config{Root: t.TempDir()})
	assert.ErrorIs(t, src.Available(), termsig.ErrUnavailable)
	n, returned := watchtest.Watch(t, quiet, src)
	assert.ErrorIs(t, watchtest.Returned(t, returned), termsig.ErrUnavailable)
	n.Stop()
	assert.Equal(t, termsig.StateUnavailable, n.Status()[0].State)
	select {
	case <-dialled:
		t.Fatal("dialled")
	default:
	}
}

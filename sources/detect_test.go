package sources_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi/acpitest"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/signal"
	"github.com/termsig/termsig/sources"
	"github.com/termsig/termsig/tencent"
	"github.com/termsig/termsig/tencent/tencenttest"
)

func names(cfg sources.Config) []string {
	var out []string
	for _, s := range sources.Detect(cfg) {
		out = append(out, s.Name())
	}
	return out
}

// clean clears the environment variables that steer detection.
func clean(t *testing.T) {
	for _, k := range []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_DISABLED", "GCE_METADATA_HOST", "DBUS_SYSTEM_BUS_ADDRESS", "AZURE_METADATA_ENDPOINT",
		alibaba.EndpointEnv, tencent.EndpointEnv} {
		t.Setenv(k, "")
	}
}

// fakeRoot returns a directory laid out like / with the given DMI files.
func fakeRoot(t *testing.T, dmi map[string]string) string {
	root := t.TempDir()
	dir := filepath.Join(root, "sys/class/dmi/id")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, v := range dmi {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644))
	}
	return root
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name string
		dmi  map[string]string
		env  map[string]string
		cfg  sources.Config
		want []string
	}{
		{name: "bare metal", dmi: map[string]string{"sys_vendor": "Dell Inc."}, want: []string{"signal"}},
		{name: "ec2", dmi: map[string]string{"sys_vendor": "Amazon EC2"}, want: []string{"signal", "imds", "asg"}},
		{name: "ec2, imds disabled", dmi: map[string]string{"sys_vendor": "Amazon EC2"}, env: map[string]string{"AWS_EC2_METADATA_DISABLED": "true"}, want: []string{"signal"}},
		{name: "imds endpoint env", env: map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:1338"}, want: []string{"signal", "imds", "asg"}},
		{name: "imds endpoint config", cfg: sources.Config{IMDS: imds.Config{Endpoint: "http://127.0.0.1:1338"}}, want: []string{"signal", "imds", "asg"}},
		{name: "gce", dmi: map[string]string{"product_name": "Google Compute Engine"}, want: []string{"signal", "gcemeta"}},
		{name: "gce host env", env: map[string]string{"GCE_METADATA_HOST": "127.0.0.1:1"}, want: []string{"signal", "gcemeta"}},
		{name: "gce host config", cfg: sources.Config{GCE: gcemeta.Config{Host: "127.0.0.1:1"}}, want: []string{"signal", "gcemeta"}},
		{name: "azure", dmi: map[string]string{"chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77"}, want: []string{"signal", "azure"}},
		{name: "azure endpoint env", env: map[string]string{"AZURE_METADATA_ENDPOINT": "http://127.0.0.1:1"}, want: []string{"signal", "azure"}},
		{name: "azure endpoint config", cfg: sources.Config{Azure: azure.Config{Endpoint: "http://127.0.0.1:1"}}, want: []string{"signal", "azure"}},
		{name: "hyper-v is not azure", dmi: map[string]string{"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"}, want: []string{"signal"}},
		{name: "alibaba", dmi: map[string]string{"sys_vendor": "Alibaba Cloud", "product_name": "Alibaba Cloud ECS"}, want: []string{"signal", "alibaba"}},
		{name: "alibaba endpoint env", env: map[string]string{alibaba.EndpointEnv: "http://127.0.0.1:1"}, want: []string{"signal", "alibaba"}},
		{name: "alibaba endpoint config", cfg: sources.Config{Alibaba: alibaba.Config{Endpoint: "http://127.0.0.1:1"}}, want: []string{"signal", "alibaba"}},
		{name: "tencent", dmi: map[string]string{"sys_vendor": "Tencent Cloud", "product_name": "Tencent Cloud CVM"}, want: []string{"signal", "tencent"}},
		{name: "tencent endpoint env", env: map[string]string{tencent.EndpointEnv: "http://127.0.0.1:1"}, want: []string{"signal", "tencent"}},
		{name: "tencent endpoint config", cfg: sources.Config{Tencent: tencent.Config{Endpoint: "http://127.0.0.1:1"}}, want: []string{"signal", "tencent"}},
		{name: "a vendor alone is no cloud", dmi: map[string]string{"sys_vendor": "Alibaba Cloud", "product_name": "KVM"}, want: []string{"signal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clean(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg := tc.cfg
			cfg.Root = fakeRoot(t, tc.dmi)
			assert.Equal(t, tc.want, names(cfg))
		})
	}
}

func TestDetectOnThisHost(t *testing.T) {
	assert.Contains(t, names(sources.Config{}), "signal")
}

func TestPlatformOnlyLeavesOutTheSignalSource(t *testing.T) {
	clean(t)
	root := fakeRoot(t, map[string]string{"sys_vendor": "Amazon EC2"})
	assert.Equal(t, []string{"imds", "asg"}, names(sources.Config{Root: root, PlatformOnly: true}))
	assert.Empty(t, names(sources.Config{Root: fakeRoot(t, nil), PlatformOnly: true}), "a laptop has no platform source")

	// A signal source of the program's own, added to Detect's, is then
	// the only one: New would refuse two of them.
	srcs := append(sources.Detect(sources.Config{Root: root, PlatformOnly: true}), signal.New())
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(srcs...)
	n.Stop()
	assert.Panics(t, func() {
		termsig.New(append(sources.Detect(sources.Config{Root: root}), signal.New())...)
	}, "two signal sources are refused, not silently kept")

	_, err := sources.ByName(sources.Config{PlatformOnly: true}, "imds", "signal")
	assert.ErrorContains(t, err, `"signal" watches this process only, and PlatformOnly is set`)
}

// Every source this package knows declares Available, so that Detect and
// programs that choose sources can ask it without a run-time guess.
func TestEveryPlatformSourceIsADetector(t *testing.T) {
	srcs, err := sources.ByName(sources.Config{}, sources.Names()...)
	require.NoError(t, err)
	for _, s := range srcs {
		_, detector := s.(termsig.Detector)
		d, ok := s.(termsig.Describer)
		local := ok && d.Traits().Local
		assert.True(t, detector || local, "%s: neither a Detector nor local", s.Name())
	}
}

func TestByName(t *testing.T) {
	srcs, err := sources.ByName(sources.Config{}, "imds", " signal")
	require.NoError(t, err)
	require.Len(t, srcs, 2)
	assert.Equal(t, "imds", srcs[0].Name())
	assert.Equal(t, "signal", srcs[1].Name())

	_, err = sources.ByName(sources.Config{}, "signal", "signal")
	assert.ErrorContains(t, err, `"signal" named twice`)
	_, err = sources.ByName(sources.Config{}, "nosuch")
	assert.ErrorContains(t, err, `unknown source "nosuch" (known: signal, imds, asg, gcemeta, azure, alibaba, tencent, acpi, logind)`)

	srcs, err = sources.ByName(sources.Config{}, "gcemeta", "acpi", "tencent", "alibaba")
	require.NoError(t, err)
	assert.Equal(t, []string{"gcemeta", "acpi", "tencent", "alibaba"}, []string{srcs[0].Name(), srcs[1].Name(), srcs[2].Name(), srcs[3].Name()}, "in the order named")
}

// Under a fake Root, acpi looks for acpid's socket there.
func TestDetectACPIUnderRoot(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the acpi source works on Linux only")
	}
	clean(t)
	root := fakeRoot(t, nil)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var/run"), 0o755))
	acpid, err := acpitest.NewAcpid()
	require.NoError(t, err)
	defer acpid.Close()
	require.NoError(t, os.Symlink(acpid.Path(), filepath.Join(root, "var/run/acpid.socket")))
	assert.Equal(t, []string{"signal", "acpi"}, names(sources.Config{Root: root}))
}

func TestDetectKeepsMisconfiguredSources(t *testing.T) {
	root := t.TempDir() // not a cloud
	srcs := sources.Detect(sources.Config{
		Root: root,
		IMDS: imds.Config{Endpoint: "169.254.169.254"}, // no scheme
		GCE:  gcemeta.Config{Host: "metadata.google.internal", MinInterval: time.Nanosecond},
	})
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(srcs...)
	defer n.Stop()
	var got []string
	for _, s := range srcs {
		got = append(got, s.Name())
	}
	require.Contains(t, got, "imds", "a misconfigured source is kept, so that its failure shows")
	require.Contains(t, got, "gcemeta")
	select {
	case <-n.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("not ready")
	}
	for _, st := range n.Status() {
		if st.Name == "imds" || st.Name == "gcemeta" {
			assert.Equal(t, termsig.StateFailed, st.State, st.Name)
			assert.ErrorContains(t, st.Err, st.Name+": ")
		}
	}
}

// logind is detected by its bus's socket: under Root, at the address in
// DBUS_SYSTEM_BUS_ADDRESS, or at Logind.Address.
func TestDetectLogind(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the logind source works on Linux only")
	}
	listen := func(path string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		ln, err := net.Listen("unix", path)
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
	}
	t.Run("root, with a comma", func(t *testing.T) {
		clean(t)
		root := fakeRoot(t, nil)
		listen(filepath.Join(root, "var/run/dbus/system_bus_socket"))
		assert.Equal(t, []string{"signal", "logind"}, names(sources.Config{Root: root}))
	})
	t.Run("env", func(t *testing.T) {
		clean(t)
		sock := filepath.Join(t.TempDir(), "bus")
		listen(sock)
		t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+sock)
		assert.Equal(t, []string{"signal", "logind"}, names(sources.Config{Root: fakeRoot(t, nil)}))
	})
	t.Run("config", func(t *testing.T) {
		clean(t)
		sock := filepath.Join(t.TempDir(), "bus")
		listen(sock)
		cfg := sources.Config{Root: fakeRoot(t, nil), Logind: logind.Config{Address: "unix:path=" + sock}}
		assert.Equal(t, []string{"signal", "logind"}, names(cfg))
	})
	t.Run("no socket", func(t *testing.T) {
		clean(t)
		t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "none"))
		assert.Equal(t, []string{"signal"}, names(sources.Config{Root: fakeRoot(t, nil)}))
	})
}

// On Alibaba Cloud and Tencent Cloud, Detect's sources report a spot
// instance's termination time through the fakes, found by the first look.
func TestDetectedSpotSourcesReportTheTerminationTime(t *testing.T) {
	clean(t)
	deadline := time.Now().Add(5 * time.Minute).Truncate(time.Second)
	ali := alibabatest.NewServer()
	defer ali.Close()
	ali.SetTokensRequired(true)
	ali.SetTerminationTime(deadline)
	ten := tencenttest.NewServer()
	defer ten.Close()
	ten.SetTerminationTime(deadline)
	cfg := sources.Config{
		Root:         fakeRoot(t, nil),
		PlatformOnly: true,
		Logger:       slog.New(slog.DiscardHandler),
		Alibaba:      alibaba.Config{Endpoint: ali.URL},
		Tencent:      tencent.Config{Endpoint: ten.URL},
	}
	srcs := sources.Detect(cfg)
	require.Equal(t, []string{"alibaba", "tencent"}, names(cfg))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, l := range sources.FirstLook(ctx, srcs...) {
		assert.True(t, l.Ready, l.Name)
		assert.NoError(t, l.Err, l.Name)
		require.Len(t, l.Notices, 1, l.Name)
		assert.Equal(t, termsig.Terminate, l.Notices[0].Kind, l.Name)
		assert.True(t, l.Notices[0].Deadline.Equal(deadline), "%s: %v", l.Name, l.Notices[0].Deadline)
	}
}

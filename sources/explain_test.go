package sources_test

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/sources"
)

// choices returns Explain's choices by source name.
func choices(cfg sources.Config) map[string]sources.Choice {
	m := map[string]sources.Choice{}
	for _, c := range sources.Explain(cfg) {
		m[c.Source.Name()] = c
	}
	return m
}

// A QEMU virtual machine, as Linux shows its firmware.
var qemu = map[string]string{
	"sys_vendor":        "QEMU",
	"board_vendor":      "QEMU",
	"product_name":      "Standard PC (Q35 + ICH9, 2009)",
	"chassis_asset_tag": "Default string",
}

func TestExplainSaysWhatWasReadForEachSourceLeftOut(t *testing.T) {
	clean(t)
	root := fakeRoot(t, qemu)
	want := map[string]string{
		"imds":    `imds: not an EC2 instance (DMI sys_vendor "QEMU", board_vendor "QEMU"), and neither Config.Endpoint nor AWS_EC2_METADATA_SERVICE_ENDPOINT is set`,
		"asg":     `asg: imds: not an EC2 instance (DMI sys_vendor "QEMU", board_vendor "QEMU"), and neither Config.Endpoint nor AWS_EC2_METADATA_SERVICE_ENDPOINT is set`,
		"gcemeta": `gcemeta: not on GCE (DMI product_name "Standard PC (Q35 + ICH9, 2009)"), and neither Config.Host nor GCE_METADATA_HOST is set`,
		"azure":   `azure: not an Azure VM (DMI chassis_asset_tag "Default string"), and neither Config.Endpoint nor AZURE_METADATA_ENDPOINT is set`,
		"alibaba": `alibaba: not an ECS instance (DMI sys_vendor "QEMU", product_name "Standard PC (Q35 + ICH9, 2009)"), and neither Config.Endpoint nor ALIBABA_METADATA_ENDPOINT is set`,
		"tencent": `tencent: not a CVM instance (DMI sys_vendor "QEMU", product_name "Standard PC (Q35 + ICH9, 2009)"), and neither Config.Endpoint nor TENCENT_METADATA_ENDPOINT is set`,
		"acpi":    "acpi: no power-button transport: no acpid socket at " + filepath.Join(root, "var/run/acpid.socket") + ", no input device at " + filepath.Join(root, "dev/input/event*"),
		"logind":  "logind: no system bus (no socket at " + filepath.Join(root, "run/dbus/system_bus_socket") + ", " + filepath.Join(root, "var/run/dbus/system_bus_socket") + ")",
	}
	if runtime.GOOS != "linux" {
		want["acpi"] = "acpi: the power button is watched on Linux only"
		want["logind"] = "logind: systemd-logind runs on Linux only"
	}
	got := sources.Explain(sources.Config{Root: root})
	require.Len(t, got, len(sources.Names()))
	for i, c := range got {
		name := c.Source.Name()
		assert.Equal(t, sources.Names()[i], name, "in Detect's order")
		if name == "signal" {
			assert.True(t, c.Chosen)
			assert.NoError(t, c.Err)
			continue
		}
		assert.False(t, c.Chosen, name)
		require.ErrorIs(t, c.Err, termsig.ErrUnavailable, name)
		assert.Equal(t, want[name]+": "+termsig.ErrUnavailable.Error(), c.Err.Error(), name)
	}
}

// Where the system shows no firmware strings at all (macOS, a container
// without /sys), the message says so rather than quoting empty strings.
func TestExplainSaysWhenNoFirmwareStringsCanBeRead(t *testing.T) {
	clean(t)
	got := choices(sources.Config{Root: t.TempDir()})
	assert.ErrorContains(t, got["imds"].Err, "imds: not an EC2 instance (no DMI strings)")
	assert.ErrorContains(t, got["gcemeta"].Err, "gcemeta: not on GCE (no DMI strings)")
	assert.ErrorContains(t, got["azure"].Err, "azure: not an Azure VM (no DMI strings)")
	assert.ErrorContains(t, got["alibaba"].Err, "alibaba: not an ECS instance (no DMI strings)")
	assert.ErrorContains(t, got["tencent"].Err, "tencent: not a CVM instance (no DMI strings)")
}

func TestExplainChoosesWhatDetectReturns(t *testing.T) {
	for _, tc := range []struct {
		name string
		dmi  map[string]string
		env  map[string]string
		cfg  sources.Config
	}{
		{name: "qemu", dmi: qemu},
		{name: "ec2", dmi: map[string]string{"sys_vendor": "Amazon EC2"}},
		{name: "gce, platform only", dmi: map[string]string{"product_name": "Google"}, cfg: sources.Config{PlatformOnly: true}},
		{name: "azure by env", env: map[string]string{"AZURE_METADATA_ENDPOINT": "http://127.0.0.1:1"}},
		{name: "alibaba", dmi: map[string]string{"product_name": "Alibaba Cloud ECS"}},
		{name: "tencent by env", env: map[string]string{"TENCENT_METADATA_ENDPOINT": "http://127.0.0.1:1"}},
		{name: "imds misconfigured", cfg: sources.Config{IMDS: imds.Config{Endpoint: "169.254.169.254"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clean(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg := tc.cfg
			cfg.Root = fakeRoot(t, tc.dmi)
			var chosen []string
			for _, c := range sources.Explain(cfg) {
				if c.Chosen {
					chosen = append(chosen, c.Source.Name())
				}
			}
			assert.Equal(t, names(cfg), chosen)
		})
	}
}

func TestExplainGivesPlatformOnlyAsTheReasonSignalIsLeftOut(t *testing.T) {
	clean(t)
	c := choices(sources.Config{Root: fakeRoot(t, nil), PlatformOnly: true})["signal"]
	assert.False(t, c.Chosen)
	assert.EqualError(t, c.Err, "sources: signal watches this process only, and PlatformOnly is set")
}

// A source whose Config cannot work is chosen, with the mistake as its
// Err, so that the failure shows instead of the source missing.
func TestExplainChoosesAMisconfiguredSourceWithItsMistake(t *testing.T) {
	clean(t)
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "169.254.169.254")
	c := choices(sources.Config{Root: fakeRoot(t, qemu)})["imds"]
	assert.True(t, c.Chosen)
	assert.NotErrorIs(t, c.Err, termsig.ErrUnavailable)
	assert.EqualError(t, c.Err, `imds: AWS_EC2_METADATA_SERVICE_ENDPOINT "169.254.169.254" is not an absolute http or https URL with a host`)
}

// Explain logs no line of its own (Detect does), only what the sources'
// Available methods log through the Logger it hands them: acpi, at debug
// level, each transport it finds unusable.
func TestExplainLogsOnlyWhatTheSourcesAvailableLog(t *testing.T) {
	clean(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sources.Explain(sources.Config{Logger: log, Root: fakeRoot(t, qemu)})
	assert.NotContains(t, buf.String(), "termsig:", "no line of Explain's own")
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if line != "" {
			assert.Contains(t, line, `level=DEBUG msg="acpi: `, "only acpi's Available logs")
		}
	}
	if runtime.GOOS == "linux" {
		assert.Contains(t, buf.String(), `level=DEBUG msg="acpi: acpid unavailable"`)
	}

	buf.Reset()
	sources.Explain(sources.Config{Logger: log, Root: fakeRoot(t, qemu), ACPI: acpi.Config{Logger: slog.New(slog.DiscardHandler)}})
	assert.Empty(t, buf.String(), "acpi logs on its own Logger when it has one")
}

func TestDetectLogsEachSourceLeftOutAtDebugLevel(t *testing.T) {
	clean(t)
	root := fakeRoot(t, qemu)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sources.Detect(sources.Config{Root: root, Logger: log})

	var leftOut []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, `msg="termsig: source left out"`) {
			assert.Contains(t, line, "level=DEBUG")
			leftOut = append(leftOut, line)
		}
	}
	require.Len(t, leftOut, 8, buf.String())
	assert.Contains(t, leftOut[0], `source=imds reason="imds: not an EC2 instance (DMI sys_vendor \"QEMU\", board_vendor \"QEMU\")`)
	for i, name := range []string{"imds", "asg", "gcemeta", "azure", "alibaba", "tencent", "acpi", "logind"} {
		assert.Contains(t, leftOut[i], "source="+name+" reason=", "in Detect's order")
	}
	assert.Contains(t, buf.String(), `level=INFO msg="termsig: detected sources" sources=[signal]`)

	buf.Reset()
	log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sources.Detect(sources.Config{Root: root, Logger: log})
	assert.Equal(t, 1, strings.Count(buf.String(), "\n"), "at level Info, only what was detected: %s", buf.String())
}

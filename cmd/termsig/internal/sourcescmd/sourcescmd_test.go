package sourcescmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/acpi/acpitest"
	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/cmd/termsig/internal/sourcescmd"
	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/logind/logindtest"
	"github.com/termsig/termsig/sources"
	"github.com/termsig/termsig/tencent/tencenttest"
	"github.com/termsig/termsig/termsigtest"
)

// usageLine is the first line of the usage, which follows a usage error.
var usageLine = strings.SplitAfter(sourcescmd.Usage, "\n")[0]

// result is what one run of Main gave.
type result struct {
	code           int
	stdout, stderr string
}

// run runs "termsig sources" with args.
func run(t *testing.T, args ...string) result {
	t.Helper()
	return runContext(t, context.Background(), args...)
}

func runContext(t *testing.T, ctx context.Context, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := sourcescmd.Main(ctx, args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// lines returns the table's lines by source name.
func (r result) lines() map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		name, _, _ := strings.Cut(line, " ")
		if name != "" {
			m[name] = line
		}
	}
	return m
}

// objects decodes the --json lines by source name.
func (r result) objects(t *testing.T) map[string]map[string]any {
	t.Helper()
	m := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		var o map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &o), line)
		m[o["source"].(string)] = o
	}
	return m
}

// host makes a fake host root, a QEMU virtual machine as Linux shows it,
// with a clean environment: every source but signal is left out there.
func host(t *testing.T) string {
	for _, k := range []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_DISABLED", "GCE_METADATA_HOST", "DBUS_SYSTEM_BUS_ADDRESS", "AZURE_METADATA_ENDPOINT",
		"ALIBABA_METADATA_ENDPOINT", "TENCENT_METADATA_ENDPOINT", "ALIBABA_CLOUD_IMDSV1_DISABLED"} {
		t.Setenv(k, "")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "sys/class/dmi/id")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, v := range map[string]string{"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644))
	}
	return root
}

func TestHelpPrintsTheUsageOnStdoutAndExitsZero(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		r := run(t, arg)
		assert.Equal(t, 0, r.code, arg)
		assert.Equal(t, sourcescmd.Usage, r.stdout, arg)
		assert.Empty(t, r.stderr, arg)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sources", "imds,nosuch"}, `--sources: sources: unknown source "nosuch" (known: ` + strings.Join(sources.Names(), ", ") + `)`},
		{[]string{"--sources", "imds,"}, `--sources: sources: unknown source ""`},
		{[]string{"--timeout", "0"}, "--timeout must be positive, not 0s"},
		{[]string{"--timeout", "soon"}, `invalid value "soon" for flag -timeout`},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"imds"}, `takes no arguments, not "imds"`},
	} {
		r := run(t, tc.args...)
		assert.Equal(t, 2, r.code, tc.args)
		assert.Empty(t, r.stdout, tc.args)
		assert.Contains(t, r.stderr, "termsig sources: "+tc.want, tc.args)
		assert.Contains(t, r.stderr, "\nusage: termsig sources [", tc.args)
	}
}

// --sources is read as by the watching commands (sources.ByName), with the
// same messages: an empty list is an unknown source "", not every source,
// and a name given twice is an error.
func TestTheSourcesListIsReadAsTheWatchingCommandsReadIt(t *testing.T) {
	root := host(t)
	for _, list := range []string{"", "imds,imds", "imds, imds", "signal,,imds", "nosuch"} {
		_, want := sources.ByName(sources.Config{}, strings.Split(list, ",")...)
		require.Error(t, want, list)
		r := run(t, "--root", root, "--sources", list)
		assert.Equal(t, 2, r.code, "%q", list)
		assert.Empty(t, r.stdout, "%q", list)
		assert.Equal(t, "termsig sources: --sources: "+want.Error()+"\n"+usageLine, r.stderr, "%q", list)
	}
	r := run(t, "--root", root, "--sources", "")
	assert.Contains(t, r.stderr, `termsig sources: --sources: sources: unknown source "" (known: `+strings.Join(sources.Names(), ", ")+`)`)
	r = run(t, "--root", root, "--sources", "imds,imds")
	assert.Contains(t, r.stderr, `termsig sources: --sources: sources: "imds" named twice`)

	r = run(t, "--root", root, "--sources", " imds , signal")
	assert.Equal(t, 1, r.code, "spaces are trimmed, as by sources.ByName")
	assert.Len(t, r.lines(), 2, r.stdout)
}

// A --root that is missing or not a directory would be read as a host
// without firmware strings or sockets: it is a usage error instead.
func TestARootThatIsNotADirectoryIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nonexistent")
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, statErr := os.Stat(missing)
	for _, tc := range []struct{ root, want string }{
		{missing, "--root " + missing + ": " + errors.Unwrap(statErr).Error()}, // "no such file or directory" on Linux
		{file, "--root " + file + ": not a directory"},
	} {
		r := run(t, "--root", tc.root)
		assert.Equal(t, 2, r.code, tc.root)
		assert.Empty(t, r.stdout, tc.root)
		assert.Equal(t, "termsig sources: "+tc.want+"\n"+usageLine, r.stderr, tc.root)
	}
	r := run(t, "--root", dir, "--sources", "signal")
	assert.Equal(t, 1, r.code, "an empty directory is a host without firmware strings: %s", r.stderr)
}

func TestNoPlatformSourceExitsOneAndSaysWhyNot(t *testing.T) {
	root := host(t)
	r := run(t, "--root", root)
	assert.Equal(t, 1, r.code, r.stdout+r.stderr)
	assert.Empty(t, r.stderr)
	got := r.lines()
	assert.Regexp(t, `^signal   applies  first look: ready in \d+\.\d ms$`, got["signal"])
	assert.Equal(t, `imds     no       not an EC2 instance (DMI sys_vendor "QEMU", board_vendor ""), and neither Config.Endpoint nor AWS_EC2_METADATA_SERVICE_ENDPOINT is set`, got["imds"])
	assert.Regexp(t, `^asg      no       `, got["asg"], "asg needs IMDS, as imds does")
	assert.Equal(t, `gcemeta  no       not on GCE (DMI product_name "Standard PC (Q35 + ICH9, 2009)"), and neither Config.Host nor GCE_METADATA_HOST is set`, got["gcemeta"])
	assert.Equal(t, `azure    no       not an Azure VM (DMI chassis_asset_tag ""), and neither Config.Endpoint nor AZURE_METADATA_ENDPOINT is set`, got["azure"])
	assert.Equal(t, `alibaba  no       not an ECS instance (DMI sys_vendor "QEMU", product_name "Standard PC (Q35 + ICH9, 2009)"), and neither Config.Endpoint nor ALIBABA_METADATA_ENDPOINT is set`, got["alibaba"])
	assert.Equal(t, `tencent  no       not a CVM instance (DMI sys_vendor "QEMU", product_name "Standard PC (Q35 + ICH9, 2009)"), and neither Config.Endpoint nor TENCENT_METADATA_ENDPOINT is set`, got["tencent"])
	if runtime.GOOS == "linux" {
		assert.Equal(t, "acpi     no       no power-button transport: no acpid socket at "+root+"/var/run/acpid.socket, no input device at "+root+"/dev/input/event*", got["acpi"])
		assert.Equal(t, "logind   no       no system bus (no socket at "+root+"/run/dbus/system_bus_socket, "+root+"/var/run/dbus/system_bus_socket)", got["logind"])
	}
	assert.Len(t, got, len(sources.Names()), r.stdout)
}

func TestOnlyTheNamedSourcesAreChecked(t *testing.T) {
	r := run(t, "--root", host(t), "--sources", "signal")
	assert.Equal(t, 1, r.code, "signal is not a platform source")
	assert.Len(t, r.lines(), 1, r.stdout)
	assert.Contains(t, r.lines()["signal"], "applies")
}

// The metadata fakes, found through the environment variables, answer
// their first look.
func TestMetadataServicesThatAnswerApplyAndExitZero(t *testing.T) {
	root := host(t)
	startClouds(t)

	r := run(t, "--root", root, "--sources", cloudSources)
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	for _, name := range strings.Split(cloudSources, ",") {
		assert.Regexp(t, `^`+name+` +applies  first look: ready in \d+\.\d ms$`, r.lines()[name])
	}

	r = run(t, "--root", root, "--sources", cloudSources, "--json")
	assert.Equal(t, 0, r.code)
	for name, o := range r.objects(t) {
		assert.Equal(t, true, o["applies"], name)
		assert.Equal(t, false, o["local"], name)
		assert.Equal(t, "ready", o["first_look"], name)
		assert.Positive(t, o["took_ms"], name)
		assert.NotContains(t, o, "error", name)
		assert.NotContains(t, o, "reason", name)
	}
}

// cloudSources are the sources of the metadata fakes of startClouds.
const cloudSources = "imds,gcemeta,azure,alibaba,tencent"

// clouds are the metadata fakes of every cloud.
type clouds struct {
	aws *imdstest.Server
	gce *gcemetatest.Server
	az  *azuretest.Server
	ali *alibabatest.Server
	ten *tencenttest.Server
}

// startClouds starts a fake of every cloud's metadata service, closed when
// the test ends, and points the sources at them through their environment
// variables.
func startClouds(t *testing.T) clouds {
	c := clouds{imdstest.NewServer(), gcemetatest.NewServer(), azuretest.NewServer(), alibabatest.NewServer(), tencenttest.NewServer()}
	for _, close := range []func(){c.aws.Close, c.gce.Close, c.az.Close, c.ali.Close, c.ten.Close} {
		t.Cleanup(close)
	}
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", c.aws.URL)
	t.Setenv("GCE_METADATA_HOST", c.gce.Host())
	t.Setenv("AZURE_METADATA_ENDPOINT", c.az.URL)
	t.Setenv("ALIBABA_METADATA_ENDPOINT", c.ali.URL)
	t.Setenv("TENCENT_METADATA_ENDPOINT", c.ten.URL)
	return c
}

// inject injects f into every fake.
func (c clouds) inject(f termsigtest.Fault) {
	c.aws.Inject(f)
	c.gce.Inject(f)
	c.az.Inject(f)
	c.ali.Inject(f)
	c.ten.Inject(f)
}

func TestJSONHasOneObjectPerSource(t *testing.T) {
	r := run(t, "--root", host(t), "--json")
	assert.Equal(t, 1, r.code)
	got := r.objects(t)
	assert.Len(t, got, len(sources.Names()))
	assert.Equal(t, map[string]any{"source": "signal", "local": true, "applies": true, "first_look": "ready", "took_ms": got["signal"]["took_ms"]}, got["signal"])
	assert.Equal(t, map[string]any{
		"source": "gcemeta", "local": false, "applies": false,
		"reason": `not on GCE (DMI product_name "Standard PC (Q35 + ICH9, 2009)"), and neither Config.Host nor GCE_METADATA_HOST is set`,
	}, got["gcemeta"])
}

func TestNoticesFoundAtTheFirstLookAreShown(t *testing.T) {
	root := host(t)
	aws := imdstest.NewServer()
	defer aws.Close()
	aws.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", aws.URL)

	r := run(t, "--root", root, "--sources", "imds")
	assert.Equal(t, 0, r.code)
	assert.Regexp(t, `^imds  applies  first look: ready in \d+\.\d ms\n {17}notice: imds: terminate \(spot interruption: terminate\), deadline `, r.stdout)

	r = run(t, "--root", root, "--sources", "imds", "--json")
	notices := r.objects(t)["imds"]["notices"].([]any)
	require.Len(t, notices, 1)
	assert.Equal(t, "terminate", notices[0].(map[string]any)["kind"])
}

func TestAServiceThatFailsAppliesAndShowsItsError(t *testing.T) {
	root := host(t)
	aws := imdstest.NewServer()
	defer aws.Close()
	aws.Inject(termsigtest.Fault{Status: 500})
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", aws.URL)

	r := run(t, "--root", root, "--sources", "imds")
	assert.Equal(t, 0, r.code, "it applies, and retries")
	assert.Regexp(t, `^imds  applies  first look: failed in \d+\.\d ms, retrying: imds: .*500`, r.lines()["imds"])

	r = run(t, "--root", root, "--sources", "imds", "--json")
	o := r.objects(t)["imds"]
	assert.Equal(t, "failed", o["first_look"])
	assert.Contains(t, o["error"], "500")
}

func TestAClosedPortAppliesAndShowsConnectionRefused(t *testing.T) {
	root := host(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	t.Setenv("AZURE_METADATA_ENDPOINT", "http://"+ln.Addr().String())

	r := run(t, "--root", root, "--sources", "azure")
	assert.Equal(t, 0, r.code)
	assert.Regexp(t, `^azure  applies  first look: failed in \d+\.\d ms, retrying: azure: .*connection refused`, r.lines()["azure"])
}

func TestAServiceThatHangsIsStillWaitingAtTheTimeout(t *testing.T) {
	root := host(t)
	gce := gcemetatest.NewServer()
	defer gce.Close()
	gce.Inject(termsigtest.Fault{Hang: true})
	t.Setenv("GCE_METADATA_HOST", gce.Host())

	start := time.Now()
	r := run(t, "--root", root, "--sources", "gcemeta", "--timeout", "200ms")
	assert.Less(t, time.Since(start), 5*time.Second, "bounded by --timeout")
	assert.Equal(t, 0, r.code, "it applies: it may yet answer")
	assert.Regexp(t, `^gcemeta  applies  first look: still waiting after \d+\.\d ms \(--timeout\)$`, r.lines()["gcemeta"])

	r = run(t, "--root", root, "--sources", "gcemeta", "--timeout", "200ms", "--json")
	o := r.objects(t)["gcemeta"]
	assert.Equal(t, "timeout", o["first_look"])
	// Took runs from the start of the source, a moment after the clock
	// of --timeout started.
	assert.InDelta(t, 200.0, o["took_ms"], 100.0)
}

// Every misbehaviour of the metadata fakes is bounded by --timeout,
// the sources are stopped when Main returns (goleak in TestMain), each
// still applies (it answers, or retries, or may yet answer), and --json
// stays one valid object per line.
func TestEveryFaultOfAMetadataServiceIsBoundedByTheTimeout(t *testing.T) {
	faults := map[string]termsigtest.Fault{
		"hang":    {Hang: true},
		"endless": {BodySize: termsigtest.EndlessBody},
		"huge":    {BodySize: 100 << 20},
		"delay":   {Delay: time.Minute},
		"drop":    {Drop: true},
		"500":     {Status: 500},
		"html":    {Body: "<html>captive portal</html>"},
	}
	for name, f := range faults {
		t.Run(name, func(t *testing.T) {
			root := host(t)
			startClouds(t).inject(f)

			start := time.Now()
			r := run(t, "--root", root, "--sources", cloudSources, "--timeout", "300ms", "--json")
			assert.Less(t, time.Since(start), 3*time.Second, "bounded by --timeout")
			assert.Equal(t, 0, r.code, r.stdout+r.stderr)
			objs := r.objects(t)
			assert.Len(t, objs, 5)
			for src, o := range objs {
				assert.Contains(t, []any{"ready", "failed", "timeout"}, o["first_look"], src)
				assert.Equal(t, true, o["applies"], src)
			}
		})
	}
}

// Notices already posted at the first look, by each metadata service, are
// in --json.
func TestNoticesPostedAtTheFirstLookAreShownForEachCloud(t *testing.T) {
	root := host(t)
	c := startClouds(t)
	c.aws.SetInterruption("stop", time.Now().Add(2*time.Minute))
	c.gce.Set("instance/preempted", "TRUE")
	c.az.SetEvents(azuretest.Event{EventID: "E1", EventType: "Preempt", NotBefore: time.Now().Add(30 * time.Second)})
	c.ali.SetTerminationTime(time.Now().Add(5 * time.Minute))
	c.ten.SetTerminationTime(time.Now().Add(2 * time.Minute))

	r := run(t, "--root", root, "--sources", cloudSources, "--json")
	assert.Equal(t, 0, r.code)
	objs := r.objects(t)
	assert.Len(t, objs, 5)
	for src, o := range objs {
		notices, _ := o["notices"].([]any)
		assert.Len(t, notices, 1, "%s: %v", src, o)
	}
}

// When the caller's context ends (SIGINT) before --timeout, the sources
// still waiting say so, and Main says it was interrupted and returns 130:
// the verdict of a look cut short is not given.
func TestAnInterruptedRunExits130AndSaysSo(t *testing.T) {
	root := host(t)
	aws := imdstest.NewServer()
	defer aws.Close()
	aws.Inject(termsigtest.Fault{Hang: true})
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", aws.URL)

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan result, 1)
	go func() { done <- runContext(t, ctx, "--root", root, "--sources", "imds", "--timeout", "1m") }()
	for aws.InFlight() == 0 {
		select {
		case <-aws.Served():
		case <-time.After(10 * time.Second):
			t.Fatal("no request reached IMDS")
		}
	}
	cancel(errors.New("interrupt signal received")) // as os/signal.NotifyContext says it
	select {
	case r := <-done:
		assert.Equal(t, 130, r.code)
		assert.Regexp(t, `^imds  applies  first look: still waiting after \d+\.\d (ms|s) \(interrupted\)$`, r.lines()["imds"])
		assert.Equal(t, "termsig sources: interrupted: interrupt signal received\n", r.stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("Main did not return when its context ended")
	}

	// Ended before it began: every look is cut short, --json too.
	ctx, cancel2 := context.WithCancel(context.Background())
	cancel2()
	r := runContext(t, ctx, "--root", root, "--sources", "imds", "--json")
	assert.Equal(t, 130, r.code)
	assert.Equal(t, "timeout", r.objects(t)["imds"]["first_look"])
	assert.Equal(t, "termsig sources: interrupted: context canceled\n", r.stderr)
}

// --timeout running out is not an interruption: the verdict stands.
func TestARunEndedByTheTimeoutIsNotInterrupted(t *testing.T) {
	root := host(t)
	aws := imdstest.NewServer()
	defer aws.Close()
	aws.Inject(termsigtest.Fault{Hang: true})
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", aws.URL)

	r := runContext(t, context.Background(), "--root", root, "--sources", "imds", "--timeout", "100ms")
	assert.Equal(t, 0, r.code)
	assert.Empty(t, r.stderr)
	assert.Regexp(t, `\(--timeout\)$`, r.lines()["imds"])
}

// A source whose Config cannot work does not apply, and shows the
// mistake: print, hook and supervise refuse to start with it, so a script
// that runs them when "termsig sources" exits 0 must not see 0.
func TestAMisconfiguredSourceDoesNotApplyAndShowsTheMistake(t *testing.T) {
	for _, tc := range []struct{ env, value, source, mistake string }{
		{"AWS_EC2_METADATA_SERVICE_ENDPOINT", "169.254.169.254", "imds", `imds: AWS_EC2_METADATA_SERVICE_ENDPOINT "169.254.169.254" is not an absolute http or https URL with a host`},
		{"AWS_EC2_METADATA_SERVICE_ENDPOINT", "::", "imds", `imds: AWS_EC2_METADATA_SERVICE_ENDPOINT "::" is not an absolute http or https URL with a host`},
		{"GCE_METADATA_HOST", "a b", "gcemeta", `gcemeta: GCE_METADATA_HOST "a b" is not a host[:port]`},
		{"AZURE_METADATA_ENDPOINT", "ftp://x", "azure", `azure: AZURE_METADATA_ENDPOINT "ftp://x" is not an absolute http or https URL with a host and no path, query or fragment`},
		{"ALIBABA_METADATA_ENDPOINT", "100.100.100.200", "alibaba", `alibaba: ALIBABA_METADATA_ENDPOINT "100.100.100.200" is not an absolute http or https URL with a host and no path, query or fragment`},
		{"TENCENT_METADATA_ENDPOINT", "http://metadata.tencentyun.com/latest", "tencent", `tencent: TENCENT_METADATA_ENDPOINT "http://metadata.tencentyun.com/latest" is not an absolute http or https URL with a host and no path, query or fragment`},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			root := host(t)
			t.Setenv(tc.env, tc.value)
			r := run(t, "--root", root)
			assert.Equal(t, 1, r.code, r.stdout+r.stderr)
			assert.Regexp(t, `^`+tc.source+` +no       first look: failed in \d+\.\d ms: `+regexp.QuoteMeta(tc.mistake)+`$`, r.lines()[tc.source])

			r = run(t, "--root", root, "--json")
			assert.Equal(t, 1, r.code)
			o := r.objects(t)[tc.source]
			assert.Equal(t, false, o["applies"])
			assert.Equal(t, "failed", o["first_look"])
			assert.Equal(t, tc.mistake, o["error"])
			assert.Equal(t, strings.TrimPrefix(tc.mistake, tc.source+": "), o["reason"])
		})
	}

	if runtime.GOOS == "linux" {
		root := host(t)
		missing := filepath.Join(t.TempDir(), "acpid.socket")
		r := run(t, "--root", root, "--sources", "acpi", "--acpid-socket", missing)
		assert.Equal(t, 1, r.code)
		assert.Regexp(t, `^acpi  no       first look: failed in \d+\.\d ms: acpi: Config.AcpidSocket: stat `+missing+`: no such file or directory$`, r.lines()["acpi"])
	}
}

// A misconfigured source does not hide one that works.
func TestAMisconfiguredSourceBesideOneThatWorksExitsZero(t *testing.T) {
	root := host(t)
	aws := imdstest.NewServer()
	defer aws.Close()
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", aws.URL)
	t.Setenv("GCE_METADATA_HOST", "a b")
	r := run(t, "--root", root, "--sources", "imds,gcemeta")
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.lines()["imds"], "applies")
	assert.Contains(t, r.lines()["gcemeta"], "no")
}

func TestACPIAppliesWithAcpidUnderTheRoot(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the acpi source works on Linux only")
	}
	root := host(t)
	acpid, err := acpitest.NewAcpid()
	require.NoError(t, err)
	defer acpid.Close()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var/run"), 0o755))
	require.NoError(t, os.Symlink(acpid.Path(), filepath.Join(root, "var/run/acpid.socket")))

	r := run(t, "--root", root, "--sources", "acpi")
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Regexp(t, `^acpi  applies  first look: ready in \d+\.\d ms$`, r.lines()["acpi"])

	r = run(t, "--sources", "acpi", "--acpid-socket", acpid.Path(), "--root", root)
	assert.Equal(t, 0, r.code, "--acpid-socket points acpi at it")
}

// logind's first look takes its delay lock, and lets go of it before
// Main returns.
func TestLogindOnTheBusApplies(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the logind source works on Linux only")
	}
	root := host(t)
	bus, fake := logindtest.Start(t, logindtest.Config{})
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.Address())

	r := run(t, "--root", root, "--sources", "logind")
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Regexp(t, `^logind  applies  first look: ready in \d+\.\d ms$`, r.lines()["logind"])
	assert.Len(t, fake.Inhibitors(), 1, "the lock was taken")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	released := func(all []logindtest.Inhibitor) bool { return len(all) == 1 && !all[0].Released.IsZero() }
	assert.NoError(t, fake.Wait(ctx, released), "and released: its descriptor closed")
}

// A system bus without systemd-logind: Detect chooses logind by its
// socket, and its first look finds that it does not apply after all.
func TestLogindMissingFromTheBusDoesNotApply(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the logind source works on Linux only")
	}
	root := host(t)
	bus, err := logindtest.StartBus()
	if err != nil {
		t.Skip(err)
	}
	defer bus.Close()
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.Address())

	r := run(t, "--root", root, "--sources", "logind")
	assert.Equal(t, 1, r.code, r.stdout+r.stderr)
	assert.Regexp(t, `^logind  no       first look \(\d+\.\d ms\): `, r.lines()["logind"])

	r = run(t, "--root", root, "--sources", "logind", "--json")
	o := r.objects(t)["logind"]
	assert.Equal(t, false, o["applies"])
	assert.Equal(t, "unavailable", o["first_look"])
	assert.NotEmpty(t, o["reason"])
}

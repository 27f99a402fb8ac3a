package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/termsig/termsig/examples/kubedrain/internal/kubetest"
	"github.com/termsig/termsig/imds/imdstest"
)

const (
	chartDir       = "deploy/chart"
	chartAllValues = "deploy/chart/ci/all-values.yaml" // every value on, as .ci/run renders it
	chartRelease   = "kubedrain"
	chartNamespace = "kube-system"
)

// helmBin returns the path of helm, the Go tool of .ci/helm/go.mod, built
// once per test binary: `go tool -n` builds it into Go's build cache (a
// warm one answers at once, and .ci/run's helm step shares it) and prints
// its path there.
var helmBin = sync.OnceValues(func() (string, error) {
	dir, err := filepath.Abs("../../.ci/helm")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "-C", dir, "tool", "-n", "helm")
	cmd.Env = append(os.Environ(), "GOWORK=off") // .ci/helm is outside the workspace
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building helm in %s: %v\n%s", dir, err, stderr.Bytes())
	}
	bin := strings.TrimSpace(string(out))
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		return "", fmt.Errorf("go tool -n helm printed %q, which is not a file: %v", bin, err)
	}
	return bin, nil
})

// helmTemplate renders the chart as release in namespace for the
// Kubernetes of kubetest, with the values files and then the values (YAML
// documents, written to files), in that order.
func helmTemplate(t testing.TB, release, namespace string, files []string, values ...string) ([]byte, error) {
	t.Helper()
	bin, err := helmBin()
	require.NoError(t, err)
	args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubetest.Version}
	for _, f := range files {
		args = append(args, "--values", f)
	}
	dir := t.TempDir()
	for i, v := range values {
		f := filepath.Join(dir, fmt.Sprintf("values-%d.yaml", i))
		require.NoError(t, os.WriteFile(f, []byte(v), 0o600))
		args = append(args, "--values", f)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// renderChart renders the chart as release chartRelease in chartNamespace,
// as helmTemplate does, and returns its objects in helm's order.
func renderChart(t testing.TB, files []string, values ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helmTemplate(t, chartRelease, chartNamespace, files, values...)
	require.NoError(t, err)
	return parseObjects(t, out)
}

// parseObjects returns the objects of a stream of YAML documents, leaving
// out the empty ones.
func parseObjects(t testing.TB, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, k8syaml.Unmarshal(doc, &m), "%s", doc)
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// find returns the one object of kind in objs, converted to T.
func find[T any](t testing.TB, objs []*unstructured.Unstructured, kind string) *T {
	t.Helper()
	var found []*T
	for _, o := range objs {
		if o.GetKind() == kind {
			v := new(T)
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v), "%s %s", kind, o.GetName())
			found = append(found, v)
		}
	}
	require.Len(t, found, 1, "the chart renders %d %s", len(found), kind)
	return found[0]
}

// container returns the DaemonSet's one container, kubedrain.
func container(t testing.TB, ds *appsv1.DaemonSet) corev1.Container {
	t.Helper()
	cs := ds.Spec.Template.Spec.Containers
	require.Len(t, cs, 1)
	require.Equal(t, "kubedrain", cs[0].Name)
	return cs[0]
}

// kubedrainFlags returns the names of kubedrain's flags, as `kubedrain -h`
// lists them.
func kubedrainFlags(t testing.TB) map[string]bool {
	t.Helper()
	bin, err := buildKubedrain()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-h")
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "kubedrain -h: %s", stderr.Bytes())
	flags := map[string]bool{}
	// flag.PrintDefaults: "  -name type" then the usage, indented further.
	for _, m := range regexp.MustCompile(`(?m)^  -([^\s=]+)`).FindAllStringSubmatch(stderr.String(), -1) {
		flags[m[1]] = true
	}
	require.NotEmpty(t, flags, "no flags in kubedrain -h:\n%s", stderr.Bytes())
	return flags
}

// flagName returns the name of the flag of arg ("--margin=10s": "margin").
func flagName(arg string) string {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name
}

// notChartValues are the flags of kubedrain that the chart has no value
// for, and why.
var notChartValues = map[string]string{
	"node":       "NODE_NAME, from the downward API's spec.nodeName",
	"kubeconfig": "in the cluster kubedrain uses its service account",
	"version":    "prints the version and exits",
}

// chartFlags are the flags that the chart renders: for each, values that
// set it, and the arguments they render.
var chartFlags = map[string]struct {
	values string
	want   []string
}{
	"sources":                   {"sources: imds,gcemeta", []string{"--sources=imds,gcemeta"}},
	"margin":                    {"margin: 15s", []string{"--margin=15s"}},
	"fallback":                  {"fallback: 1m", []string{"--fallback=1m"}},
	"max-hold":                  {"maxHold: 30m", []string{"--max-hold=30m"}},
	"on-rebalance":              {"onRebalance: drain", []string{"--on-rebalance=drain"}},
	"on-maintenance":            {"onMaintenance: ignore", []string{"--on-maintenance=ignore"}},
	"pod-selector-exempt":       {`podSelectorExempt: "tier in (edge),!canary"`, []string{"--pod-selector-exempt=tier in (edge),!canary"}},
	"dry-run":                   {"dryRun: true", []string{"--dry-run"}},
	"log-format":                {"logFormat: text", []string{"--log-format=text"}},
	"log-level":                 {"logLevel: debug", []string{"--log-level=debug"}},
	"imds-interval":             {"imdsInterval: 500ms", []string{"--imds-interval=500ms"}},
	"imds-advisory-interval":    {"imdsAdvisoryInterval: 0s", []string{"--imds-advisory-interval=0s"}},
	"metrics-bind-address":      {"metrics: {port: 9100}", []string{"--metrics-bind-address=:9100"}},
	"health-probe-bind-address": {"probes: {port: 9101}", []string{"--health-probe-bind-address=:9101"}},
	"webhook-url":               {"webhook: {url: 'https://hooks.example.com/x?a=1'}", []string{"--webhook-url=https://hooks.example.com/x?a=1"}},
	"webhook-url-file":          {"webhook: {urlSecret: {name: hook, key: endpoint}}", []string{"--webhook-url-file=/etc/kubedrain/webhook/endpoint"}},
	"webhook-template":          {`webhook: {template: '{"t": {{json .Text}}}'}`, []string{`--webhook-template={"t": {{json .Text}}}`}},
	"webhook-header":            {"webhook: {headers: ['A: 1', 'B: $(TOKEN)']}", []string{"--webhook-header=A: 1", "--webhook-header=B: $(TOKEN)"}},
	"webhook-advice":            {"webhook: {advice: true}", []string{"--webhook-advice"}},
}

// defaultArgs are the arguments that the chart's defaults render: only
// the listeners of the probes and the metrics.
var defaultArgs = []string{"--metrics-bind-address=:9092", "--health-probe-bind-address=:9093"}

// TestChartHasAValueForEveryFlag: each flag of kubedrain's (but those of
// notChartValues) has a value in values.yaml that renders it, and the
// files of ci/ together render it; nothing renders a flag that kubedrain
// does not have, and kubedrain parses what each file of ci/ renders. A
// flag added to kubedrain fails this test until the chart has a value for
// it.
func TestChartHasAValueForEveryFlag(t *testing.T) {
	flags := kubedrainFlags(t)
	values := chartValues(t)
	for f := range flags {
		_, covered := chartFlags[f]
		_, excluded := notChartValues[f]
		if !covered && !excluded {
			t.Errorf("kubedrain --%s has no value in the chart: add one to %s/values.yaml, its README.md and chartFlags", f, chartDir)
		}
	}
	for f := range maps.Keys(chartFlags) {
		if !flags[f] {
			t.Errorf("the chart renders --%s, which kubedrain does not have", f)
		}
	}
	// args renders values and returns the DaemonSet's arguments, each of
	// a flag that kubedrain has.
	args := func(t *testing.T, vals ...string) []string {
		t.Helper()
		for _, v := range vals {
			var m map[string]any
			require.NoError(t, k8syaml.Unmarshal([]byte(v), &m))
			for _, p := range valuePaths(m, "", false) {
				assert.True(t, hasValue(values, p), "%s is not in values.yaml", p)
			}
		}
		got := container(t, find[appsv1.DaemonSet](t, renderChart(t, nil, vals...), "DaemonSet")).Args
		for _, a := range got {
			assert.True(t, strings.HasPrefix(a, "--") && flags[flagName(a)], "the chart renders %q: not a flag of kubedrain", a)
		}
		return got
	}

	t.Run("ci files", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
		require.NoError(t, err)
		require.Contains(t, files, chartAllValues)
		bin, err := buildKubedrain()
		require.NoError(t, err)
		rendered := map[string]bool{}
		for _, f := range files {
			got := container(t, find[appsv1.DaemonSet](t, renderChart(t, []string{f}), "DaemonSet")).Args
			for _, a := range got {
				rendered[flagName(a)] = true
			}
			// kubedrain parses all its flags before it looks at
			// --version: it exits 0 only if it knows every one.
			out, err := exec.Command(bin, append(slices.Clone(got), "--version")...).CombinedOutput()
			assert.NoError(t, err, "kubedrain %q: %s", got, out)
		}
		var missing []string
		for f := range flags {
			if _, excluded := notChartValues[f]; !excluded && !rendered[f] {
				missing = append(missing, "--"+f)
			}
		}
		slices.Sort(missing)
		assert.Empty(t, missing, "no file of %s/ci renders these flags of kubedrain's", chartDir)
	})
	t.Run("defaults", func(t *testing.T) {
		assert.Equal(t, defaultArgs, args(t))
		// Empty values, whatever their form, render no flag.
		assert.Equal(t, defaultArgs, args(t, "sources: ''\nmargin: null\ndryRun: false\nwebhook: {url: '', headers: [], advice: false}\nextraArgs: []"))
	})
	for f, c := range chartFlags {
		t.Run(f, func(t *testing.T) {
			got := args(t, c.values)
			for _, w := range c.want {
				assert.Contains(t, got, w)
			}
			for _, a := range got {
				assert.True(t, slices.Contains(c.want, a) || slices.Contains(defaultArgs, a), "%q: renders %q as well", c.values, a)
			}
		})
	}
	t.Run("extraArgs", func(t *testing.T) {
		got := args(t, "margin: 15s\nextraArgs: ['--margin=20s']")
		assert.Equal(t, []string{"--margin=15s", defaultArgs[0], defaultArgs[1], "--margin=20s"}, got, "extraArgs come last, and win")
	})
	t.Run("off", func(t *testing.T) {
		ds := find[appsv1.DaemonSet](t, renderChart(t, nil, "metrics: {enabled: false}\nprobes: {enabled: false}"), "DaemonSet")
		c := container(t, ds)
		assert.Empty(t, c.Args)
		assert.Empty(t, c.Ports)
		assert.Nil(t, c.LivenessProbe)
		assert.Nil(t, c.ReadinessProbe)
	})
	t.Run("one listener", func(t *testing.T) {
		// The same port for both: one listener in kubedrain, one
		// container port, which the probes use.
		ds := find[appsv1.DaemonSet](t, renderChart(t, nil, "metrics: {port: 9100}\nprobes: {port: 9100}"), "DaemonSet")
		c := container(t, ds)
		assert.Equal(t, []string{"--metrics-bind-address=:9100", "--health-probe-bind-address=:9100"}, c.Args)
		assert.Equal(t, []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100, Protocol: corev1.ProtocolTCP}}, c.Ports)
		assert.Equal(t, intstr.FromString("metrics"), c.LivenessProbe.HTTPGet.Port)
		assert.Equal(t, intstr.FromString("metrics"), c.ReadinessProbe.HTTPGet.Port)
	})
	t.Run("refused", func(t *testing.T) {
		for _, v := range []string{
			"webhook: {url: 'https://x.example.com', urlSecret: {name: hook}}",
			"metrics: {enabled: false}\nserviceMonitor: {enabled: true}",
		} {
			_, err := helmTemplate(t, chartRelease, chartNamespace, nil, v)
			assert.Error(t, err, "%s", v)
		}
	})
}

// TestChartProbesAskTheRenderedListener: the rendered probes ask
// kubedrain's /healthz and /readyz on the port of
// --health-probe-bind-address, the container port "metrics" is that of
// --metrics-bind-address; with the defaults and with each file of ci/.
func TestChartProbesAskTheRenderedListener(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	require.NoError(t, err)
	cases := map[string][]string{"defaults": nil}
	for _, f := range files {
		cases[filepath.Base(f)] = []string{f}
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			ds := find[appsv1.DaemonSet](t, renderChart(t, files), "DaemonSet")
			c := container(t, ds)
			listen := listeners(t, c)
			assert.Equal(t, listen["metrics-bind-address"], containerPort(t, c, intstr.FromString("metrics")))
			for path, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
				if p == nil && name == "webhook-url-values.yaml" && path == "/healthz" {
					continue // livenessProbe.enabled: false
				}
				require.NotNil(t, p, path)
				require.NotNil(t, p.HTTPGet, path)
				assert.Equal(t, path, p.HTTPGet.Path)
				assert.Equal(t, listen["health-probe-bind-address"], containerPort(t, c, p.HTTPGet.Port), "the probe of %s", path)
			}
		})
	}
}

// listeners returns the ports of kubedrain's --metrics-bind-address and
// --health-probe-bind-address among c's arguments, which must listen on
// every address (the kubelet probes the pod's IP: the node's, on the
// host's network).
func listeners(t testing.TB, c corev1.Container) map[string]int32 {
	t.Helper()
	ports := map[string]int32{}
	for _, a := range c.Args {
		name, addr, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if name != "metrics-bind-address" && name != "health-probe-bind-address" {
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		require.NoError(t, err, a)
		assert.Contains(t, []string{"", "0.0.0.0", "::"}, host, "%s: not on every address", a)
		n, err := strconv.ParseInt(port, 10, 32)
		require.NoError(t, err, a)
		ports[name] = int32(n)
	}
	return ports
}

// containerPort resolves p, a number or the name of one of c's ports.
func containerPort(t testing.TB, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("no container port named %q", p.StrVal)
	return 0
}

// TestChartRBACIsDeploys: the chart's ClusterRole and Role allow what
// deploy/rbac.yaml's do, no more and no less, the Role in the same
// namespace.
func TestChartRBACIsDeploys(t *testing.T) {
	b, err := os.ReadFile("deploy/rbac.yaml")
	require.NoError(t, err)
	var clusterRules, rules []rbacv1.PolicyRule
	var roleNS string
	for _, doc := range strings.Split(string(b), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		require.NoError(t, err)
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			clusterRules = o.Rules
		case *rbacv1.Role:
			rules, roleNS = o.Rules, o.Namespace
		}
	}
	require.NotEmpty(t, clusterRules)
	require.NotEmpty(t, rules)
	objs := renderChart(t, []string{chartAllValues})
	assert.Equal(t, clusterRules, find[rbacv1.ClusterRole](t, objs, "ClusterRole").Rules)
	role := find[rbacv1.Role](t, objs, "Role")
	assert.Equal(t, rules, role.Rules)
	assert.Equal(t, roleNS, role.Namespace)

	// The bindings name the roles, and the ServiceAccount that the
	// DaemonSet runs as.
	ds := find[appsv1.DaemonSet](t, objs, "DaemonSet")
	sa := find[corev1.ServiceAccount](t, objs, "ServiceAccount")
	assert.Equal(t, sa.Name, ds.Spec.Template.Spec.ServiceAccountName)
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: chartNamespace}}
	crb := find[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding")
	assert.Equal(t, subject, crb.Subjects)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: find[rbacv1.ClusterRole](t, objs, "ClusterRole").Name}, crb.RoleRef)
	rb := find[rbacv1.RoleBinding](t, objs, "RoleBinding")
	assert.Equal(t, subject, rb.Subjects)
	assert.Equal(t, role.Namespace, rb.Namespace)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, rb.RoleRef)

	// rbac.create and serviceAccount.create false: none of them.
	for _, o := range renderChart(t, nil, "rbac: {create: false}\nserviceAccount: {create: false, name: theirs}") {
		assert.Contains(t, []string{"DaemonSet"}, o.GetKind())
		if o.GetKind() == "DaemonSet" {
			assert.Equal(t, "theirs", o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["serviceAccountName"])
		}
	}
}

// TestChartDocumented: the chart's README.md has a row for each value of
// values.yaml (or for a map that holds it), and none for a value that is
// not there; Chart.yaml's appVersion is the version of termsig that
// kubedrain is released with (the image's tag, by RELEASING.md).
func TestChartDocumented(t *testing.T) {
	values := chartValues(t)
	b, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	require.NoError(t, err)
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		rows[m[1]] = true
	}
	require.NotEmpty(t, rows)
	for r := range rows {
		assert.True(t, hasValue(values, r), "README.md: %s is not in values.yaml", r)
	}
	for _, p := range valuePaths(values, "", true) {
		documented := false
		for q := p; q != "" && !documented; {
			documented = rows[q]
			i := strings.LastIndexByte(q, '.')
			if i < 0 {
				break
			}
			q = q[:i]
		}
		assert.True(t, documented, "README.md has no row for %s", p)
	}

	chart, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	var meta struct{ Version, AppVersion string }
	require.NoError(t, k8syaml.Unmarshal(chart, &meta))
	mod, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s+github\.com/termsig/termsig (v\S+)`).FindSubmatch(mod)
	require.NotNil(t, m, "go.mod requires no termsig")
	assert.Equal(t, string(m[1]), "v"+meta.AppVersion, "Chart.yaml's appVersion is not the termsig that go.mod requires")
	assert.Equal(t, "kubedrain:v"+meta.AppVersion, container(t, find[appsv1.DaemonSet](t, renderChart(t, nil), "DaemonSet")).Image)
}

// chartValues returns the chart's values.yaml.
func chartValues(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, k8syaml.Unmarshal(b, &m))
	return m
}

// valuePaths returns the dotted paths of the leaves of m: its values that
// are not maps, and, with emptyMaps, its empty maps.
func valuePaths(m map[string]any, prefix string, emptyMaps bool) []string {
	var paths []string
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && (len(sub) > 0 || !emptyMaps) {
			paths = append(paths, valuePaths(sub, prefix+k+".", emptyMaps)...)
			continue
		}
		paths = append(paths, prefix+k)
	}
	return paths
}

// hasValue reports whether values has the dotted path p.
func hasValue(values map[string]any, p string) bool {
	var v any = values
	for k := range strings.SplitSeq(p, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[k]; !ok {
			return false
		}
	}
	return true
}

// serviceMonitorCRD is the Prometheus Operator's CustomResourceDefinition
// of ServiceMonitor, cut down to the fields that the chart renders, so
// that the API server refuses (with strict field validation) one that the
// chart misspells.
const serviceMonitorCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              required: [endpoints, selector]
              properties:
                jobLabel: {type: string}
                namespaceSelector:
                  type: object
                  properties:
                    any: {type: boolean}
                    matchNames: {type: array, items: {type: string}}
                selector:
                  type: object
                  properties:
                    matchLabels: {type: object, additionalProperties: {type: string}}
                endpoints:
                  type: array
                  items:
                    type: object
                    properties:
                      port: {type: string}
                      path: {type: string}
                      interval: {type: string, pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'}
                      scrapeTimeout: {type: string, pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'}
                      relabelings: &relabelings
                        type: array
                        items:
                          type: object
                          properties:
                            action: {type: string}
                            modulus: {type: integer}
                            regex: {type: string}
                            replacement: {type: string}
                            separator: {type: string}
                            sourceLabels: {type: array, items: {type: string}}
                            targetLabel: {type: string}
                      metricRelabelings: *relabelings
`

// resources are the API resources of the kinds that the chart renders.
var resources = map[string]struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	"ServiceAccount":     {corev1.SchemeGroupVersion.WithResource("serviceaccounts"), true},
	"Service":            {corev1.SchemeGroupVersion.WithResource("services"), true},
	"ClusterRole":        {rbacv1.SchemeGroupVersion.WithResource("clusterroles"), false},
	"ClusterRoleBinding": {rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), false},
	"Role":               {rbacv1.SchemeGroupVersion.WithResource("roles"), true},
	"RoleBinding":        {rbacv1.SchemeGroupVersion.WithResource("rolebindings"), true},
	"DaemonSet":          {appsv1.SchemeGroupVersion.WithResource("daemonsets"), true},
	"ServiceMonitor":     {schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}, true},
	"CustomResourceDefinition": {schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1",
		Resource: "customresourcedefinitions"}, false},
}

// applyObjects creates objs on the API server, as `helm template | kubectl
// create -f -` would, with strict field validation: a field that the API
// server does not know is an error, not dropped. A namespaced object must
// name its namespace.
func applyObjects(t testing.TB, dyn dynamic.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		r, ok := resources[o.GetKind()]
		require.True(t, ok, "the chart renders a %s: add it to resources", o.GetKind())
		require.Equal(t, o.GroupVersionKind().GroupVersion(), r.gvr.GroupVersion(), "%s %s", o.GetKind(), o.GetName())
		var ri dynamic.ResourceInterface = dyn.Resource(r.gvr)
		if r.namespaced {
			require.NotEmpty(t, o.GetNamespace(), "%s %s names no namespace", o.GetKind(), o.GetName())
			ri = dyn.Resource(r.gvr).Namespace(o.GetNamespace())
		} else {
			require.Empty(t, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		}
		_, err := ri.Create(t.Context(), o, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
	}
}

// installServiceMonitorCRD creates serviceMonitorCRD and waits until the
// API server serves it.
func installServiceMonitorCRD(t testing.TB, c *kubetest.Cluster, dyn dynamic.Interface) {
	t.Helper()
	applyObjects(t, dyn, parseObjects(t, []byte(serviceMonitorCRD)))
	gvr := resources["ServiceMonitor"].gvr
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for {
		res, err := c.Client.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		if err == nil && slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource }) {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("the API server does not serve %s: %v", gvr, err)
		}
	}
}

// A kubelet stands in for the kubelet that would run the chart's pod on
// testNode: it gives kubedrain the environment, the files and the
// arguments of the pod's container.
type kubelet struct {
	t      testing.TB
	c      *kubetest.Cluster
	pod    podRef
	env    map[string]string
	mounts map[string]string // a volume's mountPath -> the directory that stands for it
}

// A podRef names a pod.
type podRef struct{ namespace, name string }

// environment returns the container's environment variables as the
// kubelet sets them: values, the downward API (fieldRef, resourceFieldRef)
// and Secrets' keys.
func (k *kubelet) environment(c corev1.Container) []string {
	k.t.Helper()
	k.env = map[string]string{}
	var env []string
	for _, e := range c.Env {
		v := e.Value
		switch from := e.ValueFrom; {
		case from == nil:
		case from.FieldRef != nil:
			v = map[string]string{"spec.nodeName": testNode, "metadata.name": k.pod.name,
				"metadata.namespace": k.pod.namespace}[from.FieldRef.FieldPath]
			require.NotEmpty(k.t, v, "%s: the kubelet stand-in has no %s", e.Name, from.FieldRef.FieldPath)
		case from.ResourceFieldRef != nil:
			require.Equal(k.t, "limits.memory", from.ResourceFieldRef.Resource, e.Name)
			v = strconv.FormatInt(c.Resources.Limits.Memory().Value(), 10)
		case from.SecretKeyRef != nil:
			s, err := k.c.Client.CoreV1().Secrets(k.pod.namespace).Get(k.t.Context(), from.SecretKeyRef.Name, metav1.GetOptions{})
			require.NoError(k.t, err, e.Name)
			v = string(s.Data[from.SecretKeyRef.Key])
		default:
			k.t.Fatalf("%s: the kubelet stand-in cannot set it", e.Name)
		}
		k.env[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	return env
}

// mountSecrets writes the Secrets of the pod's secret volumes that c
// mounts into directories, which stand for their mount paths.
func (k *kubelet) mountSecrets(spec corev1.PodSpec, c corev1.Container) {
	k.t.Helper()
	k.mounts = map[string]string{}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		require.GreaterOrEqual(k.t, i, 0, "no volume %s", m.Name)
		sv := spec.Volumes[i].Secret
		if sv == nil {
			continue
		}
		s, err := k.c.Client.CoreV1().Secrets(k.pod.namespace).Get(k.t.Context(), sv.SecretName, metav1.GetOptions{})
		require.NoError(k.t, err, m.Name)
		dir := k.t.TempDir()
		for _, it := range sv.Items {
			require.Contains(k.t, s.Data, it.Key, "the Secret %s", sv.SecretName)
			require.NoError(k.t, os.WriteFile(filepath.Join(dir, it.Path), s.Data[it.Key], 0o400))
		}
		k.mounts[m.MountPath] = dir
	}
}

var envRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// args returns c's arguments as the container sees them: $(NAME) replaced
// by the variable NAME of its environment, if it has one, $$ by $; and,
// here, a path under a mounted Secret's mountPath by the same path in the
// directory that stands for it.
func (k *kubelet) args(c corev1.Container) []string {
	var args []string
	for _, a := range c.Args {
		a = envRef.ReplaceAllStringFunc(a, func(ref string) string {
			if ref == "$$" {
				return "$"
			}
			if v, ok := k.env[ref[2:len(ref)-1]]; ok {
				return v
			}
			return ref
		})
		for mp, dir := range k.mounts {
			if name, path, ok := strings.Cut(a, "="+mp+"/"); ok {
				a = name + "=" + filepath.Join(dir, path)
			}
		}
		args = append(args, a)
	}
	return args
}

// startChartKubedrain runs kubedrain with args and env (the container's,
// as a kubelet gives them, and the test's), and with --kubeconfig standing
// for the in-cluster config of its service account.
func startChartKubedrain(t testing.TB, args, env []string, kubeconfig string) *kubedrainProc {
	t.Helper()
	bin, err := buildKubedrain()
	require.NoError(t, err)
	cmd := exec.Command(bin, append(args, "--kubeconfig="+kubeconfig)...)
	cmd.Env = append(os.Environ(), env...) // the later wins
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &kubedrainProc{cmd: cmd, done: make(chan struct{}), seen: make(chan struct{})}
	go p.read(stderr)
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("kubedrain %q; its log:\n%s", args, p.raw.String())
		}
	})
	p.await(t, "kubedrain: watching")
	return p
}

// A hookRequest is a POST that the fake webhook received.
type hookRequest struct {
	header http.Header
	body   []byte
}

// TestChartAppliedToTheAPIServerDrainsWithItsServiceAccount applies what the chart renders, with every value
// on, to a real kube-apiserver, and runs kubedrain as the chart's pod
// would run it: the rendered arguments and environment, the mounted
// Secret of the webhook's URL, the token of the chart's ServiceAccount.
// Its probes and metrics answer on the rendered ports, and a spot
// interruption cordons and drains the node (the chart's RBAC is enough),
// records Events, and posts to the webhook with the rendered headers; the
// pods that --pod-selector-exempt names and kubedrain's own are left.
func TestChartAppliedToTheAPIServerDrainsWithItsServiceAccount(t *testing.T) {
	c := kubetest.Start(t)
	client := c.Client
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	installServiceMonitorCRD(t, c, dyn)

	// The defaults are valid too, as another release in another namespace.
	defaults, err := helmTemplate(t, "spare", "spare", nil)
	require.NoError(t, err)
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "spare"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	applyObjects(t, dyn, parseObjects(t, defaults))

	// kubedrain listens on ports free here, rather than 9092 and 9093.
	ports := freeLocalPorts(t, 2)
	objs := renderChart(t, []string{chartAllValues},
		fmt.Sprintf("metrics: {port: %d}\nprobes: {port: %d}", ports[0], ports[1]))
	applyObjects(t, dyn, objs)
	ds := find[appsv1.DaemonSet](t, objs, "DaemonSet")
	svc := find[corev1.Service](t, objs, "Service")
	spec := ds.Spec.Template.Spec
	ctr := container(t, ds)

	// The webhook: its URL and a token for its Authorization header are
	// in the Secret that the values name, which the user makes.
	hooks := make(chan hookRequest, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case hooks <- hookRequest{r.Header.Clone(), b}:
		default:
		}
	}))
	t.Cleanup(hook.Close) // after kubedrain's stop, registered later
	token := rand.Text()
	_, err = client.CoreV1().Secrets(chartNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "kubedrain-webhook", Namespace: chartNamespace},
		Data:       map[string][]byte{"url": []byte(hook.URL + "/hook\n"), "token": []byte(token)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().Nodes().Create(ctx, newNode(), metav1.CreateOptions{})
	require.NoError(t, err)
	self := podRef{chartNamespace, ds.Name + "-x7k2p"}
	for _, p := range []*corev1.Pod{
		newPod("work", "plain"),
		newPod("work", "cache", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "cache", "tier": "edge"} }),
		newPod(self.namespace, self.name, func(p *corev1.Pod) {
			p.Labels = ds.Spec.Template.Labels
			p.Spec.ServiceAccountName = spec.ServiceAccountName
		}),
	} {
		createRunningPod(t, client, p)
	}

	k := &kubelet{t: t, c: c, pod: self}
	env := k.environment(ctr)
	k.mountSecrets(spec, ctr)
	args := k.args(ctr)
	srv := imdstest.NewServer()
	defer srv.Close()
	env = append(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT="+srv.URL)
	kubeconfig := c.Kubeconfig(t, c.ServiceAccountConfig(t, chartNamespace, spec.ServiceAccountName))
	kd := startChartKubedrain(t, args, env, kubeconfig)

	// The probes, where the kubelet would ask them; the metrics, where
	// the Service sends Prometheus.
	for _, p := range []*corev1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe} {
		untilOK(t, fmt.Sprintf("http://127.0.0.1:%d%s", containerPort(t, ctr, p.HTTPGet.Port), p.HTTPGet.Path))
	}
	require.Len(t, svc.Spec.Ports, 1)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", containerPort(t, ctr, svc.Spec.Ports[0].TargetPort))
	assert.Contains(t, untilOK(t, metricsURL), "go_goroutines")
	for k, v := range svc.Spec.Selector {
		assert.Equal(t, v, ds.Spec.Template.Labels[k], "the Service selects no pod of the DaemonSet")
	}
	sm := find[unstructured.Unstructured](t, objs, "ServiceMonitor")
	ep, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.Len(t, ep, 1)
	assert.Equal(t, svc.Spec.Ports[0].Name, ep[0].(map[string]any)["port"], "the ServiceMonitor's port is not the Service's")
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		assert.Equal(t, v, svc.Labels[k], "the ServiceMonitor selects not the Service")
	}

	// A spot interruption two minutes ahead.
	srv.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	untilNode(t, client, "cordoned and tainted", func(n *corev1.Node) bool {
		return n.Spec.Unschedulable && hasTaint(n, "terminate")
	})
	untilPods(t, client, "work", "the plain pod evicted", terminating("work/plain"))
	kd.await(t, "kubedrain: drain done")
	for _, name := range []string{"work/cache", self.namespace + "/" + self.name} {
		ns, n, _ := strings.Cut(name, "/")
		p, err := client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, p.DeletionTimestamp, "%s must stay", name)
	}
	evs, err := client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var actions []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == testNode {
			actions = append(actions, e.Action+"/"+e.Reason)
		}
	}
	assert.Subset(t, actions, []string{"Drain/TerminationNotice", "Drain/Drained"})
	assert.Contains(t, untilOK(t, metricsURL), "termsig_notices_total")

	// The webhook got the notice, with the rendered headers and template.
	select {
	case r := <-hooks:
		assert.Equal(t, "ci", r.header.Get("X-Kubedrain"))
		assert.Equal(t, "Bearer "+token, r.header.Get("Authorization"))
		var body struct{ Text, Node string }
		require.NoError(t, json.Unmarshal(r.body, &body), "%s", r.body)
		assert.Contains(t, body.Text, "terminate")
		assert.Equal(t, testNode, body.Node)
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook got nothing")
	}
}

// freeLocalPorts returns n distinct ports free on 127.0.0.1 a moment ago.
func freeLocalPorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close() // held until all are chosen, so that they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// probeClient keeps no idle connection, whose goroutines goleak would see.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

// untilOK GETs url until it answers 200, as a kubelet's probe would, and
// returns the body.
func untilOK(t testing.TB, url string) string {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for {
		resp, err := probeClient.Get(url)
		var why string
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(b)
			}
			why = resp.Status + ": " + string(b)
		} else {
			why = err.Error()
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("GET %s: %s", url, why)
		}
	}
}

// TestChartIsDeploysDaemonSet: with its defaults, the chart's pod is
// deploy/daemonset.yaml's, but for kubedrain's arguments (deploy/ spells
// out some defaults) and the node selector (the chart's asks for Linux):
// the same network, priority, tolerations, environment, ports, probes,
// resources, security context and mounts.
func TestChartIsDeploysDaemonSet(t *testing.T) {
	b, err := os.ReadFile("deploy/daemonset.yaml")
	require.NoError(t, err)
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	require.NoError(t, err)
	want := obj.(*appsv1.DaemonSet)
	got := find[appsv1.DaemonSet](t, renderChart(t, nil), "DaemonSet")
	ws, gs := want.Spec.Template.Spec, got.Spec.Template.Spec
	assert.Equal(t, ws.HostNetwork, gs.HostNetwork, "hostNetwork")
	assert.Equal(t, ws.DNSPolicy, gs.DNSPolicy, "dnsPolicy")
	assert.Equal(t, ws.PriorityClassName, gs.PriorityClassName, "priorityClassName")
	assert.Equal(t, ws.Tolerations, gs.Tolerations, "tolerations")
	assert.Equal(t, ws.TerminationGracePeriodSeconds, gs.TerminationGracePeriodSeconds, "terminationGracePeriodSeconds")
	assert.Equal(t, ws.Volumes, gs.Volumes, "volumes")
	assert.Equal(t, want.Spec.UpdateStrategy, got.Spec.UpdateStrategy, "updateStrategy")
	wc, gc := container(t, want), container(t, got)
	assert.ElementsMatch(t, wc.Env, gc.Env, "env")
	assert.Equal(t, wc.Ports, gc.Ports, "ports")
	assert.Equal(t, wc.LivenessProbe, gc.LivenessProbe, "livenessProbe")
	assert.Equal(t, wc.ReadinessProbe, gc.ReadinessProbe, "readinessProbe")
	assert.Equal(t, wc.Resources, gc.Resources, "resources")
	assert.Equal(t, wc.SecurityContext, gc.SecurityContext, "securityContext")
	assert.Equal(t, wc.VolumeMounts, gc.VolumeMounts, "volumeMounts")
	assert.Equal(t, listeners(t, wc), listeners(t, gc), "the listeners of the metrics and the probes")
}

package azure_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/internal/watchtest"
)

// azureTag is Azure's chassis asset tag.
const azureTag = "7783-7084-3265-9085-8269-3286-77"

// fakeHost returns a directory laid out like / with the DMI files of a
// Hyper-V VM (what Azure's look like), with the chassis asset tag tag ("":
// none).
func fakeHost(t *testing.T, tag string) string {
	root := t.TempDir()
	dmi := filepath.Join(root, "sys", "class", "dmi", "id")
	require.NoError(t, os.MkdirAll(dmi, 0o755))
	files := map[string]string{
		"sys_vendor":   "Microsoft Corporation\n",
		"board_vendor": "Microsoft Corporation\n",
		"product_name": "Virtual Machine\n",
	}
	if tag != "" {
		files["chassis_asset_tag"] = tag + "\n"
	}
	for name, v := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dmi, name), []byte(v), 0o644))
	}
	return root
}

// A Config that cannot work makes Available and Watch fail at once, with
// an error that names the field and does not wrap ErrUnavailable; the
// Notifier counts the source as failed, and nothing is requested.
func TestConfigErrors(t *testing.T) {
	const notURL = "is not an absolute http or https URL with a host and no path, query or fragment"
	for _, tc := range []struct {
		name string
		cfg  azure.Config
		env  string // AZURE_METADATA_ENDPOINT
		want string
	}{
		{"endpoint without scheme", azure.Config{Endpoint: "127.0.0.1:8080"}, "", `azure: Config.Endpoint "127.0.0.1:8080" ` + notURL},
		{"endpoint host:port", azure.Config{Endpoint: "localhost:8080"}, "", `azure: Config.Endpoint "localhost:8080" ` + notURL},
		{"endpoint with a path", azure.Config{Endpoint: "http://127.0.0.1:8080/metadata"}, "", `azure: Config.Endpoint "http://127.0.0.1:8080/metadata" ` + notURL},
		{"endpoint with a query", azure.Config{Endpoint: "http://127.0.0.1:8080?api-version=2020-07-01"}, "", `azure: Config.Endpoint "http://127.0.0.1:8080?api-version=2020-07-01" ` + notURL},
		{"endpoint with a user", azure.Config{Endpoint: "http://user:pw@127.0.0.1:8080"}, "", `azure: Config.Endpoint "http://user:pw@127.0.0.1:8080" ` + notURL},
		{"endpoint ftp", azure.Config{Endpoint: "ftp://127.0.0.1"}, "", `azure: Config.Endpoint "ftp://127.0.0.1" ` + notURL},
		{"endpoint without host", azure.Config{Endpoint: "http:///x"}, "", `azure: Config.Endpoint "http:///x" ` + notURL},
		{"endpoint with a space", azure.Config{Endpoint: "http://127.0.0.1 :80"}, "", `azure: Config.Endpoint "http://127.0.0.1 :80" ` + notURL},
		{"env without scheme", azure.Config{}, "169.254.169.254", `azure: AZURE_METADATA_ENDPOINT "169.254.169.254" ` + notURL},
		{"env with a path", azure.Config{}, "http://169.254.169.254/metadata/scheduledevents", `azure: AZURE_METADATA_ENDPOINT "http://169.254.169.254/metadata/scheduledevents" ` + notURL},
		{"negative Interval", azure.Config{Endpoint: "http://127.0.0.1:1", Interval: -time.Second}, "", "azure: Config.Interval is negative (-1s)"},
		{"negative RequestTimeout", azure.Config{Endpoint: "http://127.0.0.1:1", RequestTimeout: -1}, "", "azure: Config.RequestTimeout is negative (-1ns)"},
		{"negative FirstRequestTimeout", azure.Config{Endpoint: "http://127.0.0.1:1", FirstRequestTimeout: -time.Minute}, "", "azure: Config.FirstRequestTimeout is negative (-1m0s)"},
		{"negative MaxBackoff", azure.Config{Endpoint: "http://127.0.0.1:1", MaxBackoff: -time.Second}, "", "azure: Config.MaxBackoff is negative (-1s)"},
		{"Interval below floor", azure.Config{Endpoint: "http://127.0.0.1:1", Interval: 5 * time.Millisecond}, "",
			"azure: Config.Interval 5ms is below FloorInterval (10ms): it would hammer the metadata service"},
		{"Interval of 1ns", azure.Config{Endpoint: "http://127.0.0.1:1", Interval: 1}, "",
			"azure: Config.Interval 1ns is below FloorInterval (10ms): it would hammer the metadata service"},
		{"off Azure too", azure.Config{MaxBackoff: -time.Second}, "", "azure: Config.MaxBackoff is negative (-1s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := newCountingTransport(t)
			t.Setenv(azure.EndpointEnv, tc.env)
			cfg := tc.cfg
			cfg.Root = fakeHost(t, "") // not Azure: the Config error comes first
			cfg.HTTPClient = &http.Client{Transport: ct}
			src := azure.New(cfg)

			err := src.Available()
			require.EqualError(t, err, tc.want)
			assert.NotErrorIs(t, err, termsig.ErrUnavailable)

			logs := testlog.New()
			n, errc := watchtest.Watch(t, termsig.Config{Logger: logs.Logger()}, src)
			require.EqualError(t, watchtest.Returned(t, errc), tc.want)
			awaitReady(t, n)
			rec := logs.WaitFor(t, "termsig: source failed", 1)
			assert.Equal(t, tc.want, testlog.Attr(rec, "err"))
			st := n.Status()[0]
			assert.Equal(t, termsig.StateFailed, st.State)
			assert.EqualError(t, st.Err, tc.want)
			assert.Empty(t, ct.requests(), "requests with a Config that cannot work")
		})
	}
}

// What the fields accept at their limits.
func TestConfigAccepted(t *testing.T) {
	t.Setenv(azure.EndpointEnv, "")
	for name, cfg := range map[string]azure.Config{
		"Interval at the floor":    {Endpoint: "http://127.0.0.1:1", Interval: azure.FloorInterval},
		"zero durations: defaults": {Endpoint: "http://127.0.0.1:1"},
		"trailing slash":           {Endpoint: "http://127.0.0.1:1/"},
		"https":                    {Endpoint: "https://metadata.example"},
		"host name and port":       {Endpoint: "http://metadata.example:8080"},
		"IPv6":                     {Endpoint: "http://[::1]:8080"},
		"tiny timeouts":            {Endpoint: "http://127.0.0.1:1", RequestTimeout: 1, FirstRequestTimeout: 1, MaxBackoff: 1},
	} {
		assert.NoError(t, azure.New(cfg).Available(), name)
	}
}

// An endpoint with a fragment or an empty query ("http://host?") has
// neither a path nor a query as url.URL sees it, and Config accepts it;
// but the paths the source appends to it land after the "#" or the "?",
// so that every request goes to "/". Such an endpoint must either be
// refused, naming the field, or work.
func TestConfigEndpointWithFragmentOrEmptyQuery(t *testing.T) {
	for _, suffix := range []string{"#metadata", "#", "?"} {
		t.Run(suffix, func(t *testing.T) {
			t.Setenv(azure.EndpointEnv, "")
			h := start(t, options{
				endpoint: func(s *azuretest.Server) string { return s.URL + suffix },
				prepare:  func(s *azuretest.Server) { s.SetEvents(pending) },
			})
			awaitReady(t, h.n) // the first look: an answer, or a failure or a Config error
			st := h.status()
			if st.State == termsig.StateFailed {
				assert.EqualError(t, st.Err, `azure: Config.Endpoint "`+h.srv.URL+suffix+`" is not an absolute http or https URL with a host and no path, query or fragment`)
				return
			}
			assert.NoError(t, st.Err, "Config.Endpoint %q accepted, yet it does not work", h.srv.URL+suffix)
			require.Len(t, h.n.C(), 1, "the first look's notice is on C by Ready")
			assert.Equal(t, "pending", h.receive().Event)
		})
	}
}

// Off Azure, with no endpoint configured, the source does not apply: no
// network probe, an error wrapping ErrUnavailable, the Notifier retires
// it quietly.
func TestUnavailableOffAzure(t *testing.T) {
	for name, root := range map[string]func(*testing.T) string{
		"Hyper-V without the tag": func(t *testing.T) string { return fakeHost(t, "") },
		"another tag":             func(t *testing.T) string { return fakeHost(t, "0000-0000-0000-0000-0000-0000-00") },
		"no DMI at all":           func(t *testing.T) string { return t.TempDir() },
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(azure.EndpointEnv, "")
			ct := newCountingTransport(t)
			src := azure.New(azure.Config{Root: root(t), HTTPClient: &http.Client{Transport: ct}})
			err := src.Available()
			require.ErrorIs(t, err, termsig.ErrUnavailable)
			assert.Contains(t, err.Error(), "azure: not an Azure VM")

			logs := testlog.New()
			n, errc := watchtest.Watch(t, termsig.Config{Logger: logs.Logger()}, src)
			assert.ErrorIs(t, watchtest.Returned(t, errc), termsig.ErrUnavailable)
			awaitReady(t, n)
			logs.WaitFor(t, "termsig: source unavailable", 1)
			assert.Equal(t, termsig.StateUnavailable, n.Status()[0].State)
			assert.Empty(t, ct.requests(), "a network probe off Azure")
		})
	}
}

// Azure's chassis asset tag makes the source available; so does an
// endpoint, configured or from the environment.
func TestAvailable(t *testing.T) {
	t.Run("asset tag", func(t *testing.T) {
		t.Setenv(azure.EndpointEnv, "")
		assert.NoError(t, azure.New(azure.Config{Root: fakeHost(t, azureTag)}).Available())
	})
	t.Run("Config.Endpoint", func(t *testing.T) {
		t.Setenv(azure.EndpointEnv, "")
		assert.NoError(t, azure.New(azure.Config{Endpoint: "http://127.0.0.1:1", Root: fakeHost(t, "")}).Available())
	})
	t.Run("AZURE_METADATA_ENDPOINT", func(t *testing.T) {
		srv := azuretest.NewServer()
		defer srv.Close()
		srv.SetEvents(pending)
		t.Setenv(azure.EndpointEnv, srv.URL)
		cfg := quick()
		cfg.Root = fakeHost(t, "")
		src := azure.New(cfg)
		require.NoError(t, src.Available())
		n := termsig.Config{Logger: testlog.New().Logger()}.New(src)
		defer n.Stop()
		assert.Equal(t, "pending", receive(t, n).Event, "the environment's endpoint is polled")
	})
	t.Run("Config.Endpoint over the environment", func(t *testing.T) {
		srv := azuretest.NewServer()
		defer srv.Close()
		srv.SetEvents(pending)
		t.Setenv(azure.EndpointEnv, "http://127.0.0.1:1")
		cfg := fast(srv)
		cfg.Root = fakeHost(t, "")
		n := termsig.Config{Logger: testlog.New().Logger()}.New(azure.New(cfg))
		defer n.Stop()
		assert.Equal(t, "pending", receive(t, n).Event)
	})
}

// A Source is watched by one Notifier at a time: a second Watch fails at
// once and leaves the first alone; once the first ends, it can be watched
// again, from scratch.
func TestWatchedTwice(t *testing.T) {
	h := start(t, options{})
	h.polls(azuretest.PathScheduledEvents, 1) // the first Watch runs

	logs := testlog.New()
	second, errc := watchtest.Watch(t, termsig.Config{Logger: logs.Logger()}, h.src)
	assert.EqualError(t, watchtest.Returned(t, errc), "azure: Source watched by two Notifiers at once")
	awaitReady(t, second)
	logs.WaitFor(t, "termsig: source failed", 1)
	st := second.Status()[0]
	assert.Equal(t, termsig.StateFailed, st.State)
	assert.EqualError(t, st.Err, "azure: Source watched by two Notifiers at once")

	h.srv.SetEvents(pending)
	assert.Equal(t, "pending", h.receive().Event, "the first Watch goes on")
	assert.Equal(t, termsig.StateRunning, h.status().State)

	h.n.Stop()
	third := termsig.Config{Logger: testlog.New().Logger()}.New(h.src)
	defer third.Stop()
	assert.Equal(t, "pending", receive(t, third).Event, "a new Watch starts from scratch")
}

// Watch returns ctx's error when ctx ends, and sends nothing after.
func TestWatchReturnsWhenCtxEnds(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	srv.SetEvents(pending)
	logs := testlog.New()
	n, errc := watchtest.Watch(t, termsig.Config{Logger: logs.Logger()}, azure.New(fast(srv)))
	nt := receive(t, n)
	assert.Equal(t, "pending", nt.Event)
	assert.Equal(t, "azure", nt.Source)
	n.Stop()
	assert.ErrorIs(t, watchtest.Returned(t, errc), context.Canceled)
	srv.SetEvents()
	var after []termsig.Notice
	for nt := range n.C() {
		after = append(after, nt)
	}
	assert.Empty(t, after, "a notice after Watch returned")
	assert.Zero(t, logs.Count("termsig: source sent a notice after its Watch returned; notice dropped"))
}

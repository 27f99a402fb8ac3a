package ghfake

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigureWritesTheRunnersFiles(t *testing.T) {
	s := start(t, Config{})
	dir := t.TempDir()
	url := s.URL() + "/acme/app"
	args := []string{"--unattended", "--url", url, "--token", registrationToken(t, s, "acme/app"),
		"--name", "spot-1", "--labels", "gpu, big", "--work", "_work", "--replace"}
	var out bytes.Buffer
	require.Equal(t, 0, configure(dir, args, nil, &out), out.String())
	for _, line := range []string{"# Authentication", "√ Connected to GitHub", "# Runner Registration",
		"√ Runner successfully added", "√ Runner connection is good", "# Runner settings", "√ Settings Saved."} {
		assert.Contains(t, out.String(), line)
	}

	b, err := os.ReadFile(filepath.Join(dir, ".runner"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte("\xef\xbb\xbf{\n  \"agentId\": ")), "BOM and indented JSON: %q", b)
	var rc map[string]any
	require.NoError(t, json.Unmarshal(b[3:], &rc))
	rs := s.Runners()
	require.Len(t, rs, 1)
	assert.Equal(t, map[string]any{
		"agentId": float64(rs[0].ID), "agentName": "spot-1", "poolId": float64(1), "poolName": "Default",
		"serverUrl": s.URL() + "/_services/pipelines", "gitHubUrl": url, "workFolder": "_work",
	}, rc)
	b, err = os.ReadFile(filepath.Join(dir, ".credentials"))
	require.NoError(t, err)
	var cred credentials
	require.NoError(t, json.Unmarshal(bytes.TrimPrefix(b, []byte(bom)), &cred))
	assert.Equal(t, "OAuth", cred.Scheme)
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, cred.Data.ClientID)
	assert.Equal(t, s.URL()+"/_apis/oauth2/token", cred.Data.AuthorizationURL)
	assert.FileExists(t, filepath.Join(dir, ".credentials_rsaparams"))

	assert.Equal(t, Runner{ID: rs[0].ID, Name: "spot-1", Scope: "acme/app",
		Labels: []string{"self-hosted", "Linux", "X64", "gpu", "big"}}, rs[0], "offline until its listener runs")
}

func TestConfigureRefuses(t *testing.T) {
	s := start(t, Config{})
	url := s.URL() + "/acme/app"
	tok := registrationToken(t, s, "acme/app")
	other := registrationToken(t, s, "acme")
	s.AddRunner("acme/app", RunnerSpec{Name: "taken"})
	configured, migrated := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(configured, ".runner"), []byte("{}"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(migrated, ".runner_migrated"), []byte("{}"), 0o644))
	const already = "Cannot configure the runner because it is already configured. " +
		"To reconfigure the runner, run 'config.cmd remove' or './config.sh remove' first."
	for _, tc := range []struct {
		name string
		dir  string
		args []string
		want string
	}{
		{"unknown token", "", []string{"--unattended", "--url", url, "--token", "NOPE", "--name", "a"},
			"Http response code: NotFound from 'POST " + s.URL() + "/api/v3/actions/runner-registration'"},
		{"another scope's token", "", []string{"--unattended", "--url", url, "--token", other, "--name", "a"}, "NotFound"},
		{"name taken", "", []string{"--unattended", "--url", url, "--token", tok, "--name", "taken"}, "A runner exists with the same name"},
		{"configured", configured, []string{"--unattended", "--url", url, "--token", tok, "--name", "a"}, already},
		{"migrated", migrated, []string{"--unattended", "--url", url, "--token", tok, "--name", "a"}, already},
		{"no url", "", []string{"--unattended", "--token", tok}, "Invalid configuration provided for url."},
		{"not a repository", "", []string{"--unattended", "--url", s.URL() + "/a/b/c", "--token", tok}, "Invalid configuration provided for url."},
		{"no token", "", []string{"--unattended", "--url", url}, "Invalid configuration provided for token."},
		{"no value", "", []string{"--unattended", "--url"}, "Invalid configuration provided for url."},
		{"a blank token in the environment", "", []string{"--unattended", "--url", url}, "Invalid configuration provided for token."},
		{"remove", "", []string{"remove", "--token", tok}, "is not implemented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = t.TempDir()
			}
			var out bytes.Buffer
			assert.Equal(t, 1, configure(dir, tc.args, []string{"ACTIONS_RUNNER_INPUT_TOKEN=  "}, &out))
			assert.Contains(t, out.String(), tc.want)
		})
	}
	assert.Len(t, s.Runners(), 1, "nothing registered")
}

func TestConfigureTakesTheEnvironmentAndWarns(t *testing.T) {
	s := start(t, Config{})
	dir := t.TempDir()
	env := []string{
		"PATH=/bin", "actions_runner_input_Url=" + s.URL() + "/acme/app", "ACTIONS_RUNNER_INPUT_TOKEN= " + registrationToken(t, s, "acme/app") + " ",
		"ACTIONS_RUNNER_INPUT_NAME=from-env", "ACTIONS_RUNNER_INPUT_LABELS=env-label", "ACTIONS_RUNNER_INPUT_EPHEMERAL=True",
		"ACTIONS_RUNNER_INPUT_WORK=", // blank: ignored
	}
	args := []string{"configure", "--unattended", "--frobnicate", "--name", "from-flag", "--name", "twice", "--Color", "blue", "-x"}
	var out bytes.Buffer
	require.Equal(t, 0, configure(dir, args, env, &out), out.String())
	// The second --name is taken for a switch, as the real parser does.
	assert.True(t, strings.HasPrefix(out.String(), "Unrecognized command-line input arguments: 'frobnicate, name, Color'. "+
		"For usage refer to: .\\config.cmd --help or ./config.sh --help\n"), out.String())
	assert.Contains(t, out.String(), "√ Settings Saved.")
	rs := s.Runners()
	require.Len(t, rs, 1)
	assert.Equal(t, "from-flag", rs[0].Name, "the flag wins, the first one")
	assert.Equal(t, []string{"self-hosted", "Linux", "X64", "env-label"}, rs[0].Labels)
	assert.True(t, rs[0].Ephemeral)
	var rc runnerConfig
	require.NoError(t, readJSONFile(filepath.Join(dir, runnerFile), &rc))
	assert.Equal(t, "_work", rc.WorkFolder)
	assert.Equal(t, s.URL()+"/acme/app", rc.GitHubURL)

	p := parseArgs([]string{"run", "--a", "1", "--b", "--c", "--", "-d", "2", "--e"})
	assert.Equal(t, []string{"run"}, p.commands)
	assert.Equal(t, []string{"b", "e"}, p.flags)
	assert.Equal(t, map[string]string{"a": "1", "c": "2"}, p.values, "-- and -d are ignored")
}

func TestConfigureReplacesAnOnlineRunner(t *testing.T) {
	s := start(t, Config{})
	dir, old := configureRunner(t, s, "acme/app", "spot-1")
	l := startListener(t, dir)
	l.out.await(t, "Listening for Jobs")
	var out bytes.Buffer
	args := []string{"--unattended", "--url", s.URL() + "/acme/app", "--token", registrationToken(t, s, "acme/app"), "--name", "spot-1", "--replace"}
	require.Equal(t, 0, configure(t.TempDir(), args, nil, &out), out.String())
	assert.Contains(t, out.String(), "√ Successfully replaced the runner")
	_, ok := s.Runner(old)
	assert.False(t, ok, "the old registration is gone")
	assert.Equal(t, 1, l.exit(), "the old listener is told")
	assert.Contains(t, l.out.String(), "The runner registration has been deleted from the server")
}

func TestListenerRunsJobs(t *testing.T) {
	s := start(t, Config{})
	dir, id := configureRunner(t, s, "acme/app", "spot-1")
	l := startListener(t, dir)
	l.out.await(t, "Listening for Jobs")
	r, _ := s.Runner(id)
	assert.True(t, r.Online && r.Connected && !r.Busy)
	assert.Regexp(t, `(?m)^√ Connected to GitHub\n\nCurrent runner version: '2\.329\.0'\n\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: Listening for Jobs$`, l.out.String())

	run := s.AddRun("acme/app", RunSpec{Name: "CI", Jobs: []JobSpec{
		{Name: "unit", Duration: time.Millisecond},
		{Name: "lint", Duration: time.Millisecond, Fail: true},
	}})
	await(t, s, "the run", runDone(s, run))
	got, _ := s.Run(run)
	assert.Equal(t, ConclusionFailure, got.Conclusion)
	assert.Equal(t, []string{ConclusionSuccess, ConclusionFailure}, []string{got.Jobs[0].Conclusion, got.Jobs[1].Conclusion})
	assert.Equal(t, id, got.Jobs[1].RunnerID)
	l.out.await(t, "Z: Job unit completed with result: Succeeded")
	l.out.await(t, "Z: Job lint completed with result: Failed")

	_, err := client(t, s, testToken).Actions.RerunFailedJobsByID(context.Background(), "acme", "app", run)
	require.NoError(t, err)
	await(t, s, "the re-run", runDone(s, run))
	again, _ := s.Run(run)
	assert.Equal(t, got.Jobs[0], again.Jobs[0], "the success is carried over as it was")
	assert.NotEqual(t, got.Jobs[1].ID, again.Jobs[1].ID)
	assert.Equal(t, 2, again.Jobs[1].Attempt)
	assert.Equal(t, 2, strings.Count(l.out.String(), "Running job: lint"))

	l.cancel()
	assert.Equal(t, 0, l.exit())
	r, _ = s.Runner(id)
	assert.False(t, r.Online || r.Connected || r.Busy)
	assert.Contains(t, l.out.String(), "Exiting...")
}

func TestListenerCancelledJob(t *testing.T) {
	s := start(t, Config{})
	dir, id := configureRunner(t, s, "acme/app", "spot-1")
	l := startListener(t, dir)
	run := s.AddRun("acme/app", RunSpec{Jobs: []JobSpec{{Name: "build"}}})
	await(t, s, "the job on the runner", jobOn(s, run, id))
	l.out.await(t, "Z: Running job: build")
	r, _ := s.Runner(id)
	assert.True(t, r.Busy)

	_, err := client(t, s, testToken).Actions.CancelWorkflowRunByID(context.Background(), "acme", "app", run)
	require.Error(t, err) // go-github's AcceptedError
	l.out.await(t, "Z: Job build completed with result: Canceled")
	got, _ := s.Run(run)
	assert.Equal(t, StatusCompleted, got.Status)
	assert.Equal(t, ConclusionCancelled, got.Conclusion)
	r, _ = s.Runner(id)
	assert.False(t, r.Busy)
	assert.True(t, r.Online, "it listens again")
}

// FinishJob ends a job that runs until told, as its steps being done
// would: the listener says it succeeded (or failed), and GitHub agrees.
func TestListenerFinishJob(t *testing.T) {
	s := start(t, Config{})
	dir, id := configureRunner(t, s, "acme/app", "spot-1")
	l := startListener(t, dir)
	run := s.AddRun("acme/app", RunSpec{Jobs: []JobSpec{{Name: "build"}}})
	assert.False(t, s.FinishJob(run+1), "no such run")
	await(t, s, "the job on the runner", jobOn(s, run, id))
	l.out.await(t, "Z: Running job: build")

	require.True(t, s.FinishJob(run))
	l.out.await(t, "Z: Job build completed with result: Succeeded")
	await(t, s, "the run", runDone(s, run))
	got, _ := s.Run(run)
	assert.Equal(t, ConclusionSuccess, got.Conclusion)
	assert.False(t, got.CancelRequested)
	r, _ := s.Runner(id)
	assert.True(t, r.Online && !r.Busy, "it listens again")
	assert.False(t, s.FinishJob(run), "nothing left in progress")
}

func TestListenerStoppedMidJob(t *testing.T) {
	s := start(t, Config{})
	dir, id := configureRunner(t, s, "acme/app", "spot-1")
	l := startListener(t, dir)
	run := s.AddRun("acme/app", RunSpec{})
	await(t, s, "the job on the runner", jobOn(s, run, id))
	l.out.await(t, "Running job: build")
	l.cancel()
	assert.Equal(t, 0, l.exit())
	assert.Regexp(t, `Exiting...\n.*Z: Job build completed with result: Canceled\n$`, l.out.String(),
		"the runner says Canceled, whatever GitHub records")
	got, _ := s.Run(run)
	assert.Equal(t, ConclusionFailure, got.Conclusion)
	assert.Equal(t, []string{ShutdownMessage}, got.Jobs[0].Annotations)
	r, _ := s.Runner(id)
	assert.False(t, r.Online || r.Busy)
}

func TestListenerEphemeral(t *testing.T) {
	s := start(t, Config{})
	dir, id := configureRunner(t, s, "acme", "eph-1", "--ephemeral")
	var rc runnerConfig
	require.NoError(t, readJSONFile(filepath.Join(dir, runnerFile), &rc))
	assert.True(t, rc.Ephemeral)
	r, _ := s.Runner(id)
	assert.True(t, r.Ephemeral)
	l := startListener(t, dir)
	l.out.await(t, "Listening for Jobs")
	run := s.AddRun("acme/lib", RunSpec{Jobs: []JobSpec{{Duration: time.Millisecond}}})
	assert.Equal(t, 0, l.exit(), "an ephemeral runner exits after its job")
	got, _ := s.Run(run)
	assert.Equal(t, ConclusionSuccess, got.Conclusion, "an organisation's runner takes its repositories' jobs")
	_, ok := s.Runner(id)
	assert.False(t, ok, "GitHub removes an ephemeral runner after its job")
}

func TestListenerLabelsAndScopes(t *testing.T) {
	s := start(t, Config{})
	dir, id := configureRunner(t, s, "acme/app", "spot-1", "--labels", "gpu")
	startListener(t, dir).out.await(t, "Listening for Jobs")
	for _, tc := range []struct {
		repo   string
		labels []string
		taken  bool
	}{
		{"acme/lib", nil, false},
		{"acme/app", []string{"self-hosted", "arm64"}, false},
		{"acme/app", []string{"self-hosted", "GPU", "linux"}, true},
	} {
		run := s.AddRun(tc.repo, RunSpec{Jobs: []JobSpec{{Labels: tc.labels, Duration: time.Millisecond}}})
		// A job is given out while AddRun holds the lock: it is now or never.
		got, _ := s.Run(run)
		assert.Equal(t, tc.taken, got.Jobs[0].RunnerID == id, "%s %v", tc.repo, tc.labels)
		if tc.taken {
			await(t, s, "the job", runDone(s, run))
		}
	}
}

func TestListenerErrors(t *testing.T) {
	s := start(t, Config{})
	var out bytes.Buffer
	assert.Equal(t, 1, listen(context.Background(), t.TempDir(), &out))
	assert.Equal(t, notConfigured+"\n", out.String())

	dir, id := configureRunner(t, s, "acme/app", "spot-1")
	_, err := client(t, s, testToken).Actions.RemoveRunner(context.Background(), "acme", "app", id)
	require.NoError(t, err)
	out.Reset()
	assert.Equal(t, 1, listen(context.Background(), dir, &out))
	assert.Contains(t, out.String(), "An error occurred: Access denied. System:ServiceIdentity;DDDDDDDD-")

	dir, _ = configureRunner(t, s, "acme/app", "spot-2")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out.Reset()
	assert.Equal(t, 0, listen(ctx, dir, &out), "stopped before it listened")
}

func TestListenerEndsWhenTheServerCloses(t *testing.T) {
	s := start(t, Config{})
	dir, _ := configureRunner(t, s, "acme/app", "spot-1")
	l := startListener(t, dir)
	l.out.await(t, "Listening for Jobs")
	s.Close()
	assert.Equal(t, 1, l.exit())
	assert.Contains(t, l.out.String(), "Runner connect error: ")
	assert.Contains(t, l.out.String(), "An error occurred: ")
}

// TestVanishedListener is a listener killed mid-job, as SIGKILL does: its
// connection drops without a word.
func TestVanishedListener(t *testing.T) {
	s := start(t, Config{})
	dir, id := configureRunner(t, s, "acme/app", "spot-1")
	run := s.AddRun("acme/app", RunSpec{})
	vanishMidJob(t, s, dir, id)
	r, _ := s.Runner(id)
	assert.True(t, r.Busy, "still busy, as on GitHub")
	got, _ := s.Run(run)
	assert.Equal(t, StatusInProgress, got.Jobs[0].Status)
	s.LoseRunner(id)
	got, _ = s.Run(run)
	assert.Equal(t, ConclusionFailure, got.Conclusion)
	assert.Equal(t, []string{LostMessage("spot-1")}, got.Jobs[0].Annotations)
	r, _ = s.Runner(id)
	assert.False(t, r.Busy || r.Online)
}

// vanishMidJob opens a session for runner id, configured in dir, as its
// listener would, takes the job it is given, and drops the connection as
// a killed listener does; it returns once the runner is offline.
func vanishMidJob(t *testing.T, s *Server, dir string, id int64) {
	t.Helper()
	var rc credentials
	require.NoError(t, readJSONFile(filepath.Join(dir, credentialsFile), &rc))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/_fake/session?runner="+itoa(id), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+rc.Data.ClientID)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, line, `"type":"job"`)
	cancel() // the process dies
	await(t, s, "the runner offline", func() bool { r, _ := s.Runner(id); return !r.Online })
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

//go:build linux

package main_test

import (
	"flag"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/asg/asgtest"
	"github.com/termsig/termsig/examples/registry"
	"github.com/termsig/termsig/imds/imdstest"
)

var flagHeldJob = flag.Duration("held.job", 2*time.Second, "how long the job of TestScaleInHeldByAHookLetsTheJobFinish runs (README's figure: 20s)")

// End to end, through the SDK's own environment variables: a scale-in of
// a runner whose group has a termination hook lets the running job
// finish (no re-run), then the runner unregisters and the hook is
// completed, within a second of the job's report.
func TestScaleInHeldByAHookLetsTheJobFinish(t *testing.T) {
	e := newEnv(t)
	api := asgtest.NewServer()
	t.Cleanup(api.Close)
	api.OnTargetState = func(id, state string) {
		if id == imdstest.InstanceID {
			e.imds.SetLifecycleState(state)
		}
	}
	api.AddGroup("runners", asgtest.Hook{Name: "finish-jobs", HeartbeatTimeout: 30 * time.Second})
	api.AddInstance(imdstest.InstanceID, "runners")
	e.imds.SetRole("runner")
	job := e.enqueue("sleep " + formatSeconds(*flagHeldJob))
	none := filepath.Join(t.TempDir(), "none")
	r := e.runner([]string{"AWS_ENDPOINT_URL_AUTO_SCALING=" + api.URL, "AWS_CONFIG_FILE=" + none, "AWS_SHARED_CREDENTIALS_FILE=" + none},
		"-sources", "signal,imds,asg")
	r.waitLine(`job j-1 started`, 1)
	require.NoError(t, api.ScaleIn(imdstest.InstanceID))
	r.waitLine(`held: stopped claiming jobs; job j-1 may finish`, 1)
	assert.Equal(t, 0, r.waitExit())

	j := e.job(job.ID)
	assert.Equal(t, registry.JobState("succeeded"), j.State, "the job finished under the hold")
	require.Len(t, j.History, 1, "no re-run")
	assert.Empty(t, e.runners(), "unregistered")
	var done []asgtest.Call
	for _, c := range api.Calls() {
		if c.Action == "CompleteLifecycleAction" && c.Err == "" {
			done = append(done, c)
		}
	}
	require.Len(t, done, 1, "the hook is completed")
	assert.Equal(t, "CONTINUE", done[0].Result)
	after := done[0].At.Sub(j.History[0].Ended)
	assert.Less(t, after, time.Second, "the hook was completed %v after the job's report", after)
	assert.Equal(t, asgtest.StateTerminated, api.State(imdstest.InstanceID))
	t.Logf("a %v job under a hold: finished, %d re-runs; job's report to CompleteLifecycleAction %v", *flagHeldJob, len(j.History)-1, after.Round(time.Millisecond))
}

// formatSeconds is d as sleep(1) takes it.
func formatSeconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

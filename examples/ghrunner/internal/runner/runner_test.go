//go:build unix

package runner

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A .runner as actions/runner 2.329 writes it: UTF-8 with a byte order
// mark, indented.
const realRunnerFile = "\xef\xbb\xbf{\n  \"agentId\": 42,\n  \"agentName\": \"spot-1\",\n  \"poolId\": 1,\n  \"poolName\": \"Default\",\n  \"serverUrl\": \"https://pipelinesghubeus2.actions.githubusercontent.com/abc/\",\n  \"gitHubUrl\": \"https://github.com/acme/app\",\n  \"workFolder\": \"_work\"\n}"

func TestParseRegistration(t *testing.T) {
	r, err := parseRegistration([]byte(realRunnerFile))
	require.NoError(t, err)
	assert.Equal(t, &Registration{ID: 42, Name: "spot-1", URL: "https://github.com/acme/app"}, r)
	for _, bad := range []string{"", "{}", `{"agentId": -1}`, `{"agentId": "42"}`, "\xef\xbb\xbf[", `{"agentId": 1e99}`} {
		_, err := parseRegistration([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
	_, err = parseRegistration(bytes.Repeat([]byte(" "), maxRunnerFile+1))
	assert.ErrorContains(t, err, "larger than")
}

func FuzzParseRegistration(f *testing.F) {
	f.Add([]byte(realRunnerFile))
	f.Add([]byte(`{"agentId": 7, "agentName": "x", "ephemeral": true}`))
	f.Add([]byte("\xef\xbb\xbf{\"agentId\": 9007199254740993}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRegistration(b)
		if err == nil && r.ID <= 0 {
			t.Fatalf("accepted agentId %d", r.ID)
		}
	})
}

func TestProcessReadsJobLinesWhateverTheJobsName(t *testing.T) {
	p := &Process{changed: make(chan struct{}, 1)}
	p.copyOutput(strings.NewReader(
		"2026-11-30 18:00:05Z: Running job: Running job: x\n"+
			"2026-11-30 18:00:06Z: Job Running job: x completed with result: Succeeded\n"+
			"Running job: not the listener's line\n"), io.Discard)
	busy, _, ended := p.State()
	assert.False(t, busy)
	assert.Equal(t, 1, ended)
	assert.Equal(t, 1, p.JobsStarted())
}

// The listener's lines, as actions/runner 2.329 prints them.
const listenerOutput = `√ Connected to GitHub

Current runner version: '2.329.0'
2026-11-30 18:00:00Z: Listening for Jobs
2026-11-30 18:00:05Z: Running job: build (ubuntu, 1.26)
`

func TestProcessFollowsJobs(t *testing.T) {
	p := &Process{changed: make(chan struct{}, 1)}
	var out bytes.Buffer
	p.copyOutput(strings.NewReader(listenerOutput), &out)
	assert.Equal(t, listenerOutput, out.String(), "copied as it is")
	busy, job, ended := p.State()
	assert.True(t, busy)
	assert.Equal(t, "build (ubuntu, 1.26)", job)
	assert.Zero(t, ended)

	p.copyOutput(strings.NewReader("2026-11-30 18:01:00Z: Job build (ubuntu, 1.26) completed with result: Canceled\n"), io.Discard)
	busy, _, ended = p.State()
	assert.False(t, busy)
	assert.Equal(t, 1, ended)
	assert.Equal(t, "Canceled", p.Result(1))
}

func TestProcessCopiesLongLinesWhole(t *testing.T) {
	p := &Process{changed: make(chan struct{}, 1)}
	// A job's name is not this long; a line that is, is copied whole and
	// its tail is not mistaken for a line of its own.
	long := strings.Repeat("x", 3*maxLine) + "Running job: fake\n"
	var out bytes.Buffer
	p.copyOutput(strings.NewReader(long+"no newline at the end"), &out)
	assert.Equal(t, long+"no newline at the end", out.String())
	busy, _, _ := p.State()
	assert.False(t, busy)
}

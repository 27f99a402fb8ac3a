package registry

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTail(t *testing.T) {
	long := strings.Repeat("a", OutputLimit)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "ok\n", "ok\n"},
		{"exactly the limit", long, long},
		{"one byte over", "x" + long, long},
		// "é" is 2 bytes: cutting at the limit would keep only its second byte.
		{"character cut in two", "é" + long[1:], long[1:]},
		{"character kept whole", "xé" + long[2:], "é" + long[2:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tail(tt.in)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), OutputLimit)
			assert.True(t, utf8.ValidString(got))
		})
	}
}

const seedState = `{
  "version": 2, "next_runner": 3, "next_job": 4,
  "runners": [
    {"id": "r-1", "name": "ci-1", "labels": ["linux"], "registered_at": "2026-01-02T03:04:05Z", "job_id": "j-2",
     "token_sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"id": "r-2", "name": "ci-2", "labels": [], "registered_at": "2026-01-02T03:04:06Z",
     "token_sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
  ],
  "jobs": [
    {"id": "j-1", "command": "true", "state": "succeeded", "attempts": 2, "exit_code": 0, "output": "ok",
     "history": [
       {"attempt": 1, "runner_id": "r-9", "state": "interrupted", "reason": "runner removed while running the job",
        "started": "2026-01-02T03:04:07Z", "ended": "2026-01-02T03:04:08Z"},
       {"attempt": 2, "runner_id": "r-1", "state": "succeeded", "exit_code": 0,
        "started": "2026-01-02T03:04:09Z", "ended": "2026-01-02T03:04:10Z"}],
     "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-02T03:04:10Z"},
    {"id": "j-2", "command": "sleep 60", "state": "running", "runner_id": "r-1", "attempts": 1, "history": [],
     "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-02T03:04:11Z", "attempt_started": "2026-01-02T03:04:11Z"},
    {"id": "j-3", "command": "make", "state": "queued", "attempts": 0, "history": [],
     "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-02T03:04:05Z"}
  ]
}`

// FuzzParseState feeds state files to the loader: a bad one is an error,
// never a panic, and a good one survives a save and a load unchanged.
func FuzzParseState(f *testing.F) {
	for _, seed := range []string{
		seedState,
		`{"version":2,"next_runner":1,"next_job":1,"runners":[],"jobs":[]}`,
		`{"version":2,"next_runner":2,"next_job":1,"runners":[{"id":"r-1","name":"a",` + `"token_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}]}`,
		`{"version":2,"next_runner":2,"next_job":1,"runners":[{"id":"r-01","name":"a"}]}`,
		`{"version":1,"next_runner":1,"next_job":1,"runners":[],"jobs":[]}`,
		`{}`, `null`, `[]`, ``, `{"version":1`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := parseState(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(st)
		require.NoError(t, err)
		again, err := parseState(out)
		require.NoError(t, err, "a state the loader accepted is written back as %s", out)
		require.Equal(t, st, again)
		require.Equal(t, st, st.clone())
	})
}

func TestSeedStateLoads(t *testing.T) {
	st, err := parseState([]byte(seedState))
	require.NoError(t, err)
	assert.Len(t, st.Runners, 2)
	assert.Len(t, st.Jobs, 3)
	assert.Equal(t, "2026-01-02T03:04:11Z", st.Jobs[1].AttemptStarted.Format("2006-01-02T15:04:05Z07:00"))
}

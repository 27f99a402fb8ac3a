package spotpoll

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

// What each answer in a row calls for: a first time is a Terminate, an
// earlier one too, a later or the same one nothing, a 404 after a notice
// Cleared and before one nothing, a bad body or a time more than an hour
// past or a day ahead an error that changes nothing.
func TestUpdate(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	p := &poller{Prefix: "x: ", Event: "spot/termination-time", Reason: "to go", Parse: func(b []byte) (time.Time, error) {
		if string(b) == "bad" {
			return time.Time{}, errors.New("not a time")
		}
		d, err := time.ParseDuration(string(b))
		return t0.Add(d), err
	}}
	type want struct {
		kind     termsig.Kind // 0: no notice
		deadline time.Duration
		err      string
	}
	var st state
	for i, tc := range []struct {
		answer Answer
		want   want
	}{
		{Answer{}, want{}},
		{Answer{Found: true, Body: []byte("5m")}, want{kind: termsig.Terminate, deadline: 5 * time.Minute}},
		{Answer{Found: true, Body: []byte("5m")}, want{}},
		{Answer{Found: true, Body: []byte("6m")}, want{}},
		{Answer{Found: true, Body: []byte("bad")}, want{err: "x: termination time: not a time"}},
		{Answer{Found: true, Body: []byte("4m")}, want{kind: termsig.Terminate, deadline: 4 * time.Minute}},
		{Answer{Found: true, Body: []byte("4m30s")}, want{}},
		{Answer{}, want{kind: termsig.Cleared}},
		{Answer{}, want{}},
		{Answer{Found: true, Body: []byte("9m")}, want{kind: termsig.Terminate, deadline: 9 * time.Minute}},
		{Answer{Found: true, Body: []byte("-61m")}, want{err: "x: termination time 2026-11-30T08:59:00Z is not within 1h0m0s before or 24h0m0s after now"}},
		{Answer{Found: true, Body: []byte("24h1m")}, want{err: "x: termination time 2026-12-01T10:01:00Z is not within 1h0m0s before or 24h0m0s after now"}},
		{Answer{Found: true, Body: []byte("-59m")}, want{kind: termsig.Terminate, deadline: -59 * time.Minute}},
	} {
		nt, err := st.update(p, tc.answer, t0)
		if tc.want.err != "" {
			assert.EqualError(t, err, tc.want.err, "answer %d", i)
			assert.Nil(t, nt, "answer %d", i)
			continue
		}
		require.NoError(t, err, "answer %d", i)
		if tc.want.kind == 0 {
			assert.Nil(t, nt, "answer %d", i)
			continue
		}
		require.NotNil(t, nt, "answer %d", i)
		assert.Equal(t, tc.want.kind, nt.Kind, "answer %d", i)
		assert.Equal(t, "spot/termination-time", nt.Event, "answer %d", i)
		assert.Equal(t, t0, nt.Observed, "answer %d", i)
		if tc.want.kind == termsig.Terminate {
			assert.Equal(t, t0.Add(tc.want.deadline), nt.Deadline, "answer %d", i)
			assert.Equal(t, string(tc.answer.Body), nt.Raw, "answer %d", i)
		}
	}
}

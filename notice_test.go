package termsig_test

import (
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

func TestKind(t *testing.T) {
	for _, tc := range []struct {
		k        termsig.Kind
		word     string
		imminent bool
	}{
		{termsig.Terminate, "terminate", true},
		{termsig.Stop, "stop", true},
		{termsig.Hibernate, "hibernate", true},
		{termsig.Reboot, "reboot", true},
		{termsig.Interrupt, "interrupt", true},
		{termsig.Reload, "reload", false},
		{termsig.Rebalance, "rebalance", false},
		{termsig.Maintenance, "maintenance", false},
		{termsig.Cleared, "cleared", false},
		{0, "kind(0)", false},
		{200, "kind(200)", false},
	} {
		t.Run(tc.word, func(t *testing.T) {
			assert.Equal(t, tc.word, tc.k.String())
			assert.Equal(t, tc.imminent, tc.k.Imminent())
			text, err := tc.k.MarshalText()
			if tc.k == 0 || tc.k == 200 {
				assert.Error(t, err)
				_, err = termsig.ParseKind(tc.word)
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			var back termsig.Kind
			require.NoError(t, back.UnmarshalText(text))
			assert.Equal(t, tc.k, back)
		})
	}
}

func TestParseKindAnyCase(t *testing.T) {
	k, err := termsig.ParseKind("ReLoad")
	require.NoError(t, err)
	assert.Equal(t, termsig.Reload, k)
	_, err = termsig.ParseKind("")
	assert.ErrorContains(t, err, `unknown kind ""`)
}

func TestNoticeJSON(t *testing.T) {
	in := termsig.Notice{Source: "imds", Kind: termsig.Stop, Reason: "spot interruption: stop"}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"Kind":"stop"`)
	var out termsig.Notice
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, in, out)
}

func TestNoticeString(t *testing.T) {
	obs := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		n    termsig.Notice
		want string
	}{
		{"empty", termsig.Notice{}, "unknown: kind(0)"},
		{"signal", termsig.Notice{Source: "signal", Kind: termsig.Terminate, Reason: "SIGTERM", Signal: syscall.SIGTERM, Observed: obs}, "signal: terminate (SIGTERM)"},
		{
			"deadline",
			termsig.Notice{Source: "imds", Kind: termsig.Terminate, Reason: "spot interruption: terminate", Observed: obs, Deadline: obs.Add(119500 * time.Millisecond)},
			"imds: terminate (spot interruption: terminate), deadline 2026-11-30T10:01:59Z (in 1m59.5s)",
		},
		{
			"past deadline",
			termsig.Notice{Source: "imds", Kind: termsig.Maintenance, Observed: obs, Deadline: obs.Add(-time.Second)},
			"imds: maintenance, deadline 2026-11-30T09:59:59Z (1s ago)",
		},
		{
			"deadline not observed",
			termsig.Notice{Source: "gcemeta", Kind: termsig.Terminate, Deadline: obs},
			"gcemeta: terminate, deadline 2026-11-30T10:00:00Z",
		},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.n.String()) })
	}
}

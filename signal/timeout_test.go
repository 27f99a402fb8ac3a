package signal_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/signal"
)

func TestStopTimeoutEnvReadsSecondsOrADuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"30", 30 * time.Second}, // terminationGracePeriodSeconds, stopTimeout, docker stop -t
		{" 30\n", 30 * time.Second},
		{"0", 0},
		{"0s", 0},
		{"1m30s", 90 * time.Second},
		{"2.5s", 2500 * time.Millisecond},
		{"9223372036", 9223372036 * time.Second},
	} {
		got, err := signal.ParseStopTimeout(tc.in)
		require.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func TestStopTimeoutEnvRefusesWhatItCannotRead(t *testing.T) {
	for _, in := range []string{
		"", "abc", "-5", "-5s", "+30", "1.5", "30 s", "0x1e",
		"9223372037",           // seconds beyond a time.Duration
		"99999999999999999999", // beyond a uint64
		"3000000h",             // beyond a time.Duration
		"infinity",
	} {
		_, err := signal.ParseStopTimeout(in)
		assert.Error(t, err, "%q", in)
	}
}

// Whatever the environment holds, reading it returns a timeout that is
// not negative or an error, and never panics.
func FuzzParseStopTimeout(f *testing.F) {
	for _, s := range []string{"30", "0", "90", "1m30s", "2.5s", "-5", "abc", "9223372037", "1e3", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := signal.ParseStopTimeout(s)
		if err == nil && d < 0 {
			t.Fatalf("%q: negative timeout %v", s, d)
		}
	})
}

package tencent

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The answer Tencent documents, read in UTC+8, and what is not one.
func TestParseTerminationTime(t *testing.T) {
	for _, tc := range []struct {
		body string
		want time.Time // zero: an error
	}{
		// "Querying the Repossession Status of a Spot Instance".
		{"2018-08-18 12:05:33", time.Date(2018, 8, 18, 4, 5, 33, 0, time.UTC)},
		{"2018-08-18 12:05:33\n", time.Date(2018, 8, 18, 4, 5, 33, 0, time.UTC)},
		{"2018-08-18 02:05:33", time.Date(2018, 8, 17, 18, 5, 33, 0, time.UTC)}, // the day before, in UTC
		{"2018-08-18T12:05:33+08:00", time.Date(2018, 8, 18, 4, 5, 33, 0, time.UTC)},
		{"2018-08-18T04:05:33Z", time.Date(2018, 8, 18, 4, 5, 33, 0, time.UTC)},
		{"", time.Time{}},
		{"2018-08-18", time.Time{}},
		{"12:05:33", time.Time{}},
		{"2018-08-18T12:05:33", time.Time{}}, // neither form
		{"2018/08/18 12:05:33", time.Time{}},
		{"<html><body>Welcome</body></html>", time.Time{}},
		{"2018-08-18 12:05:33 2018-08-18 12:05:34", time.Time{}},
		{"2018-02-30 12:05:33", time.Time{}},
	} {
		t.Run(tc.body, func(t *testing.T) {
			got, err := parseTerminationTime([]byte(tc.body))
			if tc.want.IsZero() {
				assert.Error(t, err)
				return
			}
			assert.NoError(t, err)
			assert.True(t, got.Equal(tc.want), "%v, want %v", got.UTC(), tc.want)
		})
	}
}

// No bytes make the parser panic, and a time without a zone is read as
// UTC+8, never as UTC or local time.
func FuzzParseTerminationTime(f *testing.F) {
	for _, s := range []string{"2018-08-18 12:05:33", "2018-08-18 12:05:33\n", "2018-08-18T12:05:33+08:00", "2018-08-18", "", "<html>"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := parseTerminationTime(body)
		if err != nil {
			return
		}
		s := strings.TrimSpace(string(body))
		if len(s) < len("2006-01-02 1:04:05") || s[4] != '-' || s[7] != '-' {
			t.Fatalf("%q taken as %v, but it is no time", body, got)
		}
		if s[10] == ' ' {
			if _, off := got.Zone(); off != 8*60*60 {
				t.Fatalf("%q taken as %v, not in UTC+8", body, got)
			}
		}
	})
}

package alibaba

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The answers Alibaba documents, and what is not one.
func TestParseTerminationTime(t *testing.T) {
	for _, tc := range []struct {
		body string
		want time.Time // zero: an error
	}{
		// "Query the interruption events of a preemptible instance".
		{"2015-01-05T18:02:00Z", time.Date(2015, 1, 5, 18, 2, 0, 0, time.UTC)},
		// "Instance metadata", instance/spot/termination-time.
		{"2020-04-07T17:03:00Z", time.Date(2020, 4, 7, 17, 3, 0, 0, time.UTC)},
		{"2020-04-07T17:03:00Z\n", time.Date(2020, 4, 7, 17, 3, 0, 0, time.UTC)},
		{"2020-04-07T17:03:00.5Z", time.Date(2020, 4, 7, 17, 3, 0, 5e8, time.UTC)},
		{"2020-04-08T01:03:00+08:00", time.Date(2020, 4, 7, 17, 3, 0, 0, time.UTC)},
		{"", time.Time{}},
		{"\n", time.Time{}},
		{"2020-04-07 17:03:00", time.Time{}}, // no zone: it could be anything
		{"2020-04-07T17:03:00", time.Time{}},
		{"<html><body>Welcome</body></html>", time.Time{}},
		{"1586278980", time.Time{}},
		{`{"time":"2020-04-07T17:03:00Z"}`, time.Time{}},
		{"2020-04-07T17:03:00Z 2020-04-07T17:04:00Z", time.Time{}},
		{"2020-13-07T17:03:00Z", time.Time{}},
	} {
		t.Run(tc.body, func(t *testing.T) {
			got, err := parseTerminationTime([]byte(tc.body))
			if tc.want.IsZero() {
				assert.Error(t, err)
				return
			}
			assert.NoError(t, err)
			assert.True(t, got.Equal(tc.want), "%v", got)
		})
	}
}

// No bytes make the parser panic, and what it takes is an RFC 3339 time
// with a zone and nothing else but white space around it.
func FuzzParseTerminationTime(f *testing.F) {
	for _, s := range []string{"2015-01-05T18:02:00Z", "2020-04-07T17:03:00Z\n", "2020-04-07 17:03:00", "2020-04-08T01:03:00+08:00", "", "<html>"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := parseTerminationTime(body)
		if err != nil {
			return
		}
		s := strings.TrimSpace(string(body))
		// Go reads a one-digit hour too ("T0:00:00Z"), which is no harm.
		if len(s) < len("2006-01-02T1:04:05Z") || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') {
			t.Fatalf("%q taken as %v, but it is no RFC 3339 time", body, got)
		}
		if z := s[len(s)-1]; z != 'Z' && z != 'z' && (z < '0' || z > '9' || s[len(s)-3] != ':') {
			t.Fatalf("%q taken as %v without a zone", body, got)
		}
	})
}

// What a token is made of, and what is not a token.
func TestValidToken(t *testing.T) {
	for _, tc := range []struct {
		tok  string
		want bool
	}{
		{"AQAEAL2bBwR8P8uGP3uXWGu3Zz5vZmLh7Rvd1mCjbB4xY3rqVhXm8g==", true},
		{"5f1f6e8a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e", true},
		{"a-b.c_d~e+f/g", true},
		{"", false},
		{"=abc", false},
		{"abc=d", false},
		{"<html>", false},
		{"two words", false},
		{"line\r\nbreak", false},
		{"nul\x00", false},
		{strings.Repeat("a", 1024), true},
		{strings.Repeat("a", 1025), false},
	} {
		assert.Equal(t, tc.want, validToken([]byte(tc.tok)), "%q", tc.tok)
	}
}

// What validToken takes can go in a header as it is.
func FuzzValidToken(f *testing.F) {
	for _, s := range []string{"AQAEAL2bBwR8P8uGP3uXWGu3Zz5vZmLh7Rvd1mCjbB4xY3rqVhXm8g==", "<html>", "a b", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !validToken(b) {
			return
		}
		for _, c := range b {
			if c <= ' ' || c >= 0x7f {
				t.Fatalf("%q taken as a token", b)
			}
		}
	})
}

package gcemetatest

import (
	"net/url"
	"testing"
)

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		"",
		"alt=json",
		"wait_for_change=true&last_etag=5c5f8e3d27a1b0e4&timeout_sec=60",
		"alt=json&last_etag=0123456789abcdef&timeout_sec=60&wait_for_change=true",
		"wait_for_change=false",
		"wait_for_change=maybe",
		"timeout_sec=-1",
		"timeout_sec=1e9",
		"alt=xml",
		"%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		w, err := parseQuery(q)
		if err != nil {
			return
		}
		if w.timeout < 0 || w.timeout > 24*3600e9 {
			t.Fatalf("%q: timeout %v", raw, w.timeout)
		}
		if w.lastETag != q.Get("last_etag") {
			t.Fatalf("%q: last_etag %q", raw, w.lastETag)
		}
	})
}

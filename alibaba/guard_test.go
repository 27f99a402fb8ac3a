package alibaba_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/internal/spotpoll/spotpolltest"
	"github.com/termsig/termsig/termsigtest"
)

// A redirect is refused, never followed, whoever made the HTTP client: the
// host it names gets no request (nor the token), and its answer makes no
// notice.
func TestRedirectsAreRefused(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, own := range []bool{true, false} {
			name := strconv.Itoa(code) + " own client"
			if !own {
				name = strconv.Itoa(code) + " caller's client"
			}
			t.Run(name, func(t *testing.T) {
				other := alibabatest.NewServer() // would announce a release
				defer other.Close()
				other.SetTerminationTime(deadline)
				from := spotpolltest.NewRedirector(t, code, other.URL)
				cfg := fast(other)
				cfg.Endpoint, cfg.RequireToken = from.URL, true
				if !own {
					tr := &http.Transport{}
					t.Cleanup(tr.CloseIdleConnections)
					cfg.HTTPClient = &http.Client{Transport: tr}
				}
				h := startOn(t, other, &cfg)
				h.logs.WaitFor(t, failing, 1)
				from.Wait(t, 3, wait)
				assert.EqualError(t, h.status().Err, "alibaba: token: redirect refused (HTTP "+strconv.Itoa(code)+")")
				assert.Empty(t, h.stop(), "notices through a redirect")
				assert.Zero(t, other.Requests(alibabatest.KeyToken)+other.Requests(alibabatest.PathTerminationTime), "requests followed the redirect")
			})
		}
	}
}

// An answer that goes on past 64 KiB is an error, cut off as it comes, for the
// termination time whatever its status, and for the token, without which
// the source reads in normal mode (or fails, if it requires tokens).
func TestHugeBodiesAreCutOff(t *testing.T) {
	const cut = "alibaba: answer larger than 64 KiB"
	for _, tc := range []struct {
		name, key string
		status    int
		size      int64
		require   bool
		want      string // "": no error, the normal mode reads
	}{
		{"200 endless", alibabatest.PathTerminationTime, http.StatusOK, termsigtest.EndlessBody, false, cut},
		{"200 100 MB", alibabatest.PathTerminationTime, http.StatusOK, 100 << 20, false, cut},
		{"404 100 MB", alibabatest.PathTerminationTime, http.StatusNotFound, 100 << 20, false, cut},
		{"404 endless", alibabatest.PathTerminationTime, http.StatusNotFound, termsigtest.EndlessBody, false, cut},
		{"token endless", alibabatest.KeyToken, http.StatusOK, termsigtest.EndlessBody, true, "alibaba: token: answer larger than 64 KiB"},
		{"token endless, normal mode", alibabatest.KeyToken, http.StatusOK, termsigtest.EndlessBody, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := alibaba.Config{Interval: alibaba.FloorInterval, MaxBackoff: 20 * time.Millisecond, RequireToken: tc.require}
			var h *harness
			var err error
			grew := spotpolltest.Allocated(func() {
				h = start(t, &cfg, func(s *alibabatest.Server) {
					s.SetTerminationTime(deadline) // what a full read would say
					s.Inject(termsigtest.Fault{Key: tc.key, Status: tc.status, BodySize: tc.size})
				})
				if tc.want == "" {
					h.receive()
					h.polls(alibabatest.PathTerminationTime, 3) // the token is asked for again a minute later
				} else {
					h.logs.WaitFor(t, failing, 1)
					h.polls(tc.key, 3)
				}
				err = h.status().Err
				h.stop()
			})
			answers := h.srv.Requests(tc.key)
			t.Logf("allocated %.1f MiB for %d answers", float64(grew)/(1<<20), answers)
			// Read whole, 100 MB answers cost hundreds of MiB each.
			assert.Less(t, grew/uint64(answers), uint64(8<<20), "per answer: the heap grew by up to that")
			if tc.want == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tc.want)
			}
		})
	}
}

// The guards hold with a client of the program's own, which is not
// changed.
func TestGuardsHoldWithTheProgramsClient(t *testing.T) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	own := &http.Client{Transport: tr}
	cfg := alibaba.Config{HTTPClient: own, Interval: alibaba.FloorInterval, MaxBackoff: 20 * time.Millisecond}
	h := start(t, &cfg, func(s *alibabatest.Server) {
		s.Inject(termsigtest.Fault{Key: alibabatest.PathTerminationTime, BodySize: termsigtest.EndlessBody})
	})
	h.logs.WaitFor(t, failing, 1)
	assert.EqualError(t, h.status().Err, "alibaba: answer larger than 64 KiB")
	assert.Nil(t, own.CheckRedirect, "the program's client is not changed")
	assert.Same(t, tr, own.Transport, "the program's client is not changed")
	assert.False(t, strings.Contains(h.status().Err.Error(), "127.0.0.1"), "no address in the error")
}

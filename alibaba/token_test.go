package alibaba_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/termsigtest"
)

// One token serves every poll, on an instance that allows the security
// hardening mode only; it asks for the longest TTL, as Alibaba's
// credentials libraries do, and the service takes it.
func TestOneTokenServesEveryPoll(t *testing.T) {
	rec := newRecorder(t)
	cfg := fast(rec.srv)
	cfg.Endpoint = rec.URL
	cfg.RequireToken = true
	rec.srv.SetTokensRequired(true)
	h := startOn(t, rec.srv, &cfg)
	h.polls(alibabatest.PathTerminationTime, 5)
	rec.srv.SetTerminationTime(deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
	assert.Equal(t, 1, rec.srv.Requests(alibabatest.KeyToken))
	assert.Equal(t, []string{"21600"}, rec.ttls(), "one request, for the longest TTL the service gives")
	assert.NoError(t, h.status().Err)
	assert.Zero(t, h.own.Count(normalMode))
}

// A token that the service forgot (it restarted) gets a 401, and the poll
// is made again at once with a fresh token: no error shows.
func TestAForgottenTokenIsReplacedAtOnce(t *testing.T) {
	h := start(t, nil, func(s *alibabatest.Server) { s.SetTokensRequired(true) })
	h.polls(alibabatest.PathTerminationTime, 2)
	h.srv.ExpireTokens()
	h.polls(alibabatest.PathTerminationTime, 3)
	assert.Equal(t, 2, h.srv.Requests(alibabatest.KeyToken))
	assert.Zero(t, h.logs.Count(failing), "the 401 was taken care of in its poll")
	h.srv.SetTerminationTime(deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
}

// Where no token can be had (an older service, a refusal, something in
// the way), the source reads in normal mode, says so once, and asks for a
// token again later; once it has one, it says that too.
func TestWithoutATokenTheSourceReadsInNormalMode(t *testing.T) {
	cfg := alibaba.WithTokenRetry(alibaba.Config{Interval: alibaba.FloorInterval, RequestTimeout: time.Second}, 50*time.Millisecond)
	h := start(t, &cfg, func(s *alibabatest.Server) {
		s.Inject(termsigtest.Fault{Key: alibabatest.KeyToken, Status: http.StatusNotFound})
	})
	rec := h.own.WaitFor(t, normalMode, 1)
	assert.Contains(t, rec.Message, "normal mode")
	h.srv.SetTerminationTime(deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
	h.polls(alibabatest.KeyToken, 2) // asked again, a retry apart
	assert.Less(t, h.srv.Requests(alibabatest.KeyToken), h.srv.Requests(alibabatest.PathTerminationTime), "not on every poll")
	assert.Equal(t, 1, h.own.Count(normalMode), "one line, not one per poll")

	h.srv.ClearFaults()
	h.own.WaitFor(t, hardenedMode, 1)
	assert.NoError(t, h.status().Err)
	assert.Zero(t, h.logs.Count(failing), "normal mode is no failure")
}

// On an instance that allows the hardening mode only, a poll without a
// token (the last token request failed) gets 403: a token is asked for at
// once, and the poll made with it.
func TestAHardenedOnlyInstanceGetsATokenAtOnce(t *testing.T) {
	h := start(t, nil, func(s *alibabatest.Server) {
		s.SetTokensRequired(true)
		s.Inject(termsigtest.Fault{Key: alibabatest.KeyToken, Count: 1, Status: http.StatusServiceUnavailable})
	})
	h.srv.SetTerminationTime(deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
	assert.Equal(t, 2, h.srv.Requests(alibabatest.KeyToken), "the one that failed, and the one after the 403")
	assert.Zero(t, h.logs.Count(failing))
}

// With RequireToken, or ALIBABA_CLOUD_IMDSV1_DISABLED=true, the source
// never reads without a token: the token's failure shows in Status, and
// the service is asked nothing else.
func TestRequiredTokensForbidTheNormalMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  alibaba.Config
		env  string
	}{
		{"config", alibaba.Config{RequireToken: true}, ""},
		{"env", alibaba.Config{}, "TRUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(alibaba.NormalModeDisabledEnv, tc.env)
			cfg := tc.cfg
			cfg.Interval, cfg.MaxBackoff = alibaba.FloorInterval, 20*time.Millisecond
			h := start(t, &cfg, func(s *alibabatest.Server) {
				s.Inject(termsigtest.Fault{Key: alibabatest.KeyToken, Status: http.StatusNotFound})
			})
			h.logs.WaitFor(t, failing, 1)
			h.polls(alibabatest.KeyToken, 3) // asked again, with backoff
			assert.EqualError(t, h.status().Err, "alibaba: token: HTTP 404: Not Found")
			assert.Zero(t, h.srv.Requests(alibabatest.PathTerminationTime))
			h.srv.ClearFaults()
			h.logs.WaitFor(t, healthy, 1)
			assert.Zero(t, h.own.Count(normalMode))
		})
	}
}

// An answer to the token request that cannot be a token (a proxy's page,
// an empty body, a line break a header cannot carry) is no token.
func TestAnAnswerThatIsNoTokenIsRefused(t *testing.T) {
	for _, body := range []string{"<html><body>Welcome</body></html>", "  ", "abc\x00def"} {
		t.Run(strconv.Quote(body), func(t *testing.T) {
			cfg := alibaba.Config{Interval: alibaba.FloorInterval, MaxBackoff: 20 * time.Millisecond, RequireToken: true}
			h := start(t, &cfg, func(s *alibabatest.Server) {
				s.Inject(termsigtest.Fault{Key: alibabatest.KeyToken, Body: body})
			})
			h.logs.WaitFor(t, failing, 1)
			assert.ErrorContains(t, h.status().Err, "alibaba: token: the answer is not a token: ")
			assert.Zero(t, h.srv.Requests(alibabatest.PathTerminationTime))
		})
	}
}

// A token answer that ends with a line break is the token before it.
func TestATokenWithALineBreakIsTheToken(t *testing.T) {
	rec := newRecorder(t)
	rec.newline = true
	cfg := fast(rec.srv)
	cfg.Endpoint, cfg.RequireToken = rec.URL, true
	rec.srv.SetTokensRequired(true)
	h := startOn(t, rec.srv, &cfg)
	rec.srv.SetTerminationTime(deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
	assert.NoError(t, h.status().Err)
}

// A recorder is a server in front of a fake that notes the TTL of each
// token request, and may end each token with a line break.
type recorder struct {
	*httptest.Server
	srv     *alibabatest.Server
	newline bool

	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{srv: alibabatest.NewServer()}
	t.Cleanup(r.srv.Close)
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPut {
			r.mu.Lock()
			r.seen = append(r.seen, req.Header.Get("X-aliyun-ecs-metadata-token-ttl-seconds"))
			r.mu.Unlock()
			if r.newline {
				w = &newlineWriter{ResponseWriter: w}
			}
		}
		r.srv.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) ttls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// newlineWriter adds a line break to a token's answer.
type newlineWriter struct {
	http.ResponseWriter
}

func (w *newlineWriter) WriteHeader(code int) {
	if n, err := strconv.Atoi(w.Header().Get("Content-Length")); err == nil {
		w.Header().Set("Content-Length", strconv.Itoa(n+1))
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *newlineWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(append(append(make([]byte, 0, len(b)+1), b...), '\n'))
	return min(n, len(b)), err
}

package ghfake

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Kinds of rate limit a [Fault] answers with.
const (
	// RateLimitPrimary is the primary rate limit: 403 with
	// X-RateLimit-Remaining: 0 and X-RateLimit-Reset, which go-github
	// reports as *github.RateLimitError.
	RateLimitPrimary = "primary"
	// RateLimitSecondary is a secondary rate limit: 403 with Retry-After
	// and a documentation_url that go-github reports as
	// *github.AbuseRateLimitError.
	RateLimitSecondary = "secondary"
	// RateLimit429 is 429 Too Many Requests with Retry-After.
	RateLimit429 = "429"
)

// Documentation links in GitHub's error answers.
const (
	docREST      = "https://docs.github.com/rest"
	docRate      = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
	docSecondary = docRate + "#about-secondary-rate-limits"
)

// A Fault makes the REST API answer matching requests badly. Faults are
// checked in the order they were injected, before the token is; the first
// that matches answers. The fake runner's private endpoints take no
// faults.
type Fault struct {
	// Method is the request method the fault applies to; "" means any.
	Method string
	// Path is a substring of the request's path after /api/v3, such as
	// "/actions/runners/" or "/cancel"; "" means any path.
	Path string
	// Times is how many matching requests the fault answers, after which
	// it is removed; 0 (or less) means every one until
	// [Server.ClearFaults].
	Times int
	// Status is the status answered, with a GitHub-style JSON message,
	// when neither RateLimit nor Hang is set; 0 means 500.
	Status int
	// RateLimit, if set, answers with a rate limit instead:
	// RateLimitPrimary, RateLimitSecondary or RateLimit429. Another value
	// is answered with 500 and a message that says so.
	RateLimit string
	// Wait is when the rate limit ends: X-RateLimit-Reset is now+Wait in
	// unix seconds, rounded up; Retry-After is Wait in whole seconds,
	// rounded up, at least 1.
	Wait time.Duration
	// Hang makes the server never answer, until the client gives up or the
	// server is closed.
	Hang bool
}

// Inject adds a fault after those already injected.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// matchFault returns the first fault that matches r, and counts r
// against it.
func (s *Server) matchFault(r *http.Request) (Fault, bool) {
	path := strings.TrimPrefix(r.URL.Path, apiPrefix)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if (f.Method != "" && !strings.EqualFold(f.Method, r.Method)) || !strings.Contains(path, f.Path) {
			continue
		}
		out := *f
		if f.Times > 0 {
			if f.Times--; f.Times == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return out, true
	}
	return Fault{}, false
}

// answerFault answers r as f says.
func (s *Server) answerFault(w http.ResponseWriter, r *http.Request, f Fault) {
	h := w.Header()
	switch f.RateLimit {
	case "":
	case RateLimitPrimary:
		reset := time.Now().Add(f.Wait)
		sec := reset.Unix()
		if reset.Nanosecond() > 0 {
			sec++
		}
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(sec, 10))
		h.Set("X-RateLimit-Used", strconv.Itoa(rateLimit))
		writeAPIError(w, http.StatusForbidden, "API rate limit exceeded for user ID 1.", docRate)
		return
	case RateLimitSecondary:
		h.Set("Retry-After", retryAfter(f.Wait))
		writeAPIError(w, http.StatusForbidden,
			"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", docSecondary)
		return
	case RateLimit429:
		h.Set("Retry-After", retryAfter(f.Wait))
		writeAPIError(w, http.StatusTooManyRequests, "Too Many Requests", docSecondary)
		return
	default:
		writeAPIError(w, http.StatusInternalServerError, fmt.Sprintf("ghfake: unknown Fault.RateLimit %q", f.RateLimit), docREST)
		return
	}
	if f.Hang {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		abort(w)
		return
	}
	s.answerStatus(w, f.Status)
}

// answerStatus answers with status and GitHub's message for it.
func (s *Server) answerStatus(w http.ResponseWriter, status int) {
	switch {
	case status == 0:
		status = http.StatusInternalServerError
	case status < 100 || status > 599:
		writeAPIError(w, http.StatusInternalServerError, fmt.Sprintf("ghfake: invalid Fault.Status %d", status), docREST)
		return
	}
	msg := http.StatusText(status)
	if status >= 500 {
		msg = "Server Error"
	}
	writeAPIError(w, status, msg, docREST)
}

// retryAfter is d in whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) string {
	sec := max(int64((d+time.Second-1)/time.Second), 1)
	return strconv.FormatInt(sec, 10)
}

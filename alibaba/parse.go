package alibaba

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/termsig/termsig/internal/spotpoll"
)

// parseTerminationTime reads instance/spot/termination-time: a UTC time
// such as "2015-01-05T18:02:00Z" (Alibaba documents yyyy-MM-ddThh:mm:ssZ,
// UTC+0), taken as RFC 3339, so that fractional seconds or an explicit
// offset read right too. Surrounding white space is allowed; anything else,
// a time without a zone among it, is an error: such bytes never make a
// notice.
func parseTerminationTime(body []byte) (time.Time, error) {
	s := bytes.TrimSpace(body)
	if len(s) == 0 {
		return time.Time{}, errors.New("empty answer")
	}
	t, err := time.Parse(time.RFC3339, string(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("not an RFC 3339 time: %s", spotpoll.Describe(s))
	}
	return t, nil
}

// validToken reports whether b, the answer to a token request, can be a
// token: 1 to 1024 characters of what a bearer token is made of (RFC 6750,
// b64token: letters, digits, "-._~+/", then "=" padding). Anything else
// (an HTML page, an empty body, bytes that a header cannot carry) is no
// token.
func validToken(b []byte) bool {
	if len(b) == 0 || len(b) > 1024 {
		return false
	}
	pad := false
	for _, c := range b {
		switch {
		case c == '=':
			pad = true
		case pad:
			return false // only padding after padding
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-._~+/", c) >= 0:
		default:
			return false
		}
	}
	return b[0] != '='
}

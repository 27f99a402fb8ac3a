package alibaba

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/termsig/termsig/internal/spotpoll"
)

// A session is the polling of one Watch: its token, and the mode it
// reads in. Its poller's goroutine alone uses it.
type session struct {
	cfg    Config // with the defaults applied
	base   string
	client *spotpoll.Client

	token    string    // "" while the source has none
	renew    time.Time // when to fetch the token again, a minute before it expires
	retry    time.Time // after a failed token request: no other one before then
	tokenErr error     // why the last token request failed
	mode     string    // the mode of the last answer, for its log line: hardened or normal
}

// The modes, as the log lines name them.
const (
	hardened = "security hardening mode (with a token)"
	normal   = "normal mode (without a token)"
)

// poll reads the termination time once, within RequestTimeout: with a
// token if the source has one or can get one, else in normal mode unless
// RequireToken. A 401 to a token (the service forgot it: it restarted),
// or a 403 without one (the instance allows the hardening mode only), is
// tried again at once with a fresh token.
func (s *session) poll(ctx context.Context) (spotpoll.Answer, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if err := s.ensureToken(ctx, rctx, false); err != nil && s.cfg.RequireToken {
		return spotpoll.Answer{}, err
	}
	status, body, err := s.get(ctx, rctx)
	if err == nil && (status == http.StatusUnauthorized && s.token != "" || status == http.StatusForbidden && s.token == "") {
		s.token = ""
		if err := s.ensureToken(ctx, rctx, true); err != nil {
			return spotpoll.Answer{}, err
		}
		status, body, err = s.get(ctx, rctx)
	}
	if err != nil {
		return spotpoll.Answer{}, err
	}
	s.logMode()
	return s.client.Answer(status, body)
}

// ensureToken fetches a token unless the source has one that is not due
// for renewal; unless force or RequireToken, not before s.retry after a
// failed request, when it returns nil and the poll reads in normal mode.
// It returns the error of a token request that failed.
func (s *session) ensureToken(ctx, rctx context.Context, force bool) error {
	now := time.Now()
	if s.token != "" && now.Before(s.renew) {
		return nil
	}
	s.token = ""
	if !force && !s.cfg.RequireToken && now.Before(s.retry) {
		return nil
	}
	tok, err := s.fetchToken(ctx, rctx)
	if err != nil {
		s.retry, s.tokenErr = time.Now().Add(s.cfg.tokenRetry), err
		return err
	}
	s.token, s.renew, s.tokenErr = tok, time.Now().Add(tokenTTL-time.Minute), nil
	return nil
}

// fetchToken asks for a token, within half of the poll's time, so that a
// service that does not answer token requests leaves the poll time to
// read in normal mode.
func (s *session) fetchToken(ctx, rctx context.Context) (string, error) {
	timeout := s.cfg.RequestTimeout / 2
	tctx, cancel := context.WithTimeout(rctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(tctx, http.MethodPut, s.base+pathToken, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set(ttlHeader, strconv.Itoa(int(tokenTTL/time.Second)))
	req.Header.Set("User-Agent", userAgent)
	status, body, err := s.client.Do(ctx, tctx, req, timeout, "token: ")
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", s.client.StatusError("token: ", status, body)
	}
	tok := bytes.TrimSpace(body)
	if !validToken(tok) {
		return "", fmt.Errorf("alibaba: token: the answer is not a token: %s", spotpoll.Describe(tok))
	}
	return string(tok), nil
}

// get reads the termination time, with the token if the source has one.
func (s *session) get(ctx, rctx context.Context) (int, []byte, error) {
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, s.base+pathTermination, nil)
	if err != nil {
		return 0, nil, err
	}
	if s.token != "" {
		req.Header.Set(tokenHeader, s.token)
	}
	req.Header.Set("User-Agent", userAgent)
	return s.client.Do(ctx, rctx, req, s.cfg.RequestTimeout, "")
}

// logMode logs the mode of an answer when it is not the last one's: one
// line when reading starts in normal mode, and one per change.
func (s *session) logMode() {
	mode := hardened
	if s.token == "" {
		mode = normal
	}
	switch {
	case mode == s.mode:
	case mode == normal:
		s.cfg.Logger.Info("alibaba: no metadata token; reading in "+mode, "err", s.tokenErr)
	case s.mode != "":
		s.cfg.Logger.Info("alibaba: reading in " + mode)
	}
	s.mode = mode
}

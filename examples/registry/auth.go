package registry

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// A registration is identified by a secret token, not by its name or id:
// names are not unique (two hosts may share one), and ids are listed by
// GET /runners. The registry keeps only the token's hash, in memory and in
// the state file, so that neither gives the token away.

// tokenHash returns the hex SHA-256 of a token.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// matches reports whether token hashes to hash, in constant time.
func matches(hash, token string) bool {
	return token != "" && hash != "" && subtle.ConstantTimeCompare([]byte(tokenHash(token)), []byte(hash)) == 1
}

// bearer returns the token of the request's "Authorization: Bearer"
// header, or "".
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

var errNoToken = errorf(http.StatusUnauthorized, `no token: send "Authorization: Bearer TOKEN"`)

// requireAdmin checks that token is the admin token.
func (s *Server) requireAdmin(token string) error {
	switch {
	case token == "":
		return errNoToken
	case s.adminHash == "":
		return errorf(http.StatusForbidden, "no admin token is configured on this registry")
	case !matches(s.adminHash, token):
		return errorf(http.StatusForbidden, "not the admin token")
	}
	return nil
}

// requireJoin checks that token may register a runner: the join token or
// the admin token.
func (s *Server) requireJoin(token string) error {
	switch {
	case token == "":
		return errNoToken
	case matches(s.joinHash, token) || matches(s.adminHash, token):
		return nil
	}
	return errorf(http.StatusForbidden, "neither the join token nor the admin token")
}

// authJobReader checks that token may read job j (nil: there is no such
// job): the admin token, or the token of a registered runner that runs it
// or ran an attempt at it. Output is the job's, and may tell more than it
// should: strangers, and other runners, read none of it.
func (s *Server) authJobReader(st *state, j *jobRecord, token string) error {
	switch {
	case token == "":
		return errNoToken
	case matches(s.adminHash, token):
		return nil
	case j == nil:
		return errorf(http.StatusForbidden, "not the admin token")
	}
	ran := func(id string) bool {
		_, rn := st.runner(id)
		return rn != nil && matches(rn.TokenHash, token)
	}
	if j.RunnerID != "" && ran(j.RunnerID) {
		return nil
	}
	for _, a := range j.History {
		if ran(a.RunnerID) {
			return nil
		}
	}
	return errorf(http.StatusForbidden, "neither the admin token nor the token of a runner of job %s", j.ID)
}

// authRunner checks that token is runner id's own, or with admin the admin
// token, and returns the runner. An unknown runner is 404, so that a
// runner whose registration is gone (removed, or its lease lapsed) can
// tell, and registers again.
func (s *Server) authRunner(st *state, id, token string, admin bool) (*runnerRecord, error) {
	if token == "" {
		return nil, errNoToken
	}
	_, rn := st.runner(id)
	if rn == nil {
		return nil, errorf(http.StatusNotFound, "no runner %s", id)
	}
	if matches(rn.TokenHash, token) || admin && s.adminHash != "" && matches(s.adminHash, token) {
		return rn, nil
	}
	return nil, errorf(http.StatusForbidden, "the token is not runner %s's", id)
}

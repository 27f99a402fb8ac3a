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

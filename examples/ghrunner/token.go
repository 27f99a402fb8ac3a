//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// tokenEnv is the environment variable that holds the API token.
// internal/runner never passes it on to config.sh or run.sh: the jobs
// would see it.
const tokenEnv = "GITHUB_TOKEN"

// maxToken bounds what is read of a token file.
const maxToken = 4096

// A tokenSource gives the API token: $GITHUB_TOKEN's, or a file's, read
// again whenever the file changes, so that a token that expires (a GitHub
// App's installation token lasts an hour) can be renewed in place by
// whatever writes it. The token is never logged.
type tokenSource struct {
	file string // "" for $GITHUB_TOKEN

	mu      sync.Mutex
	token   string
	modTime time.Time
	size    int64
}

func newTokenSource(file string) (*tokenSource, error) {
	ts := &tokenSource{file: file}
	if file == "" {
		tok, err := checkToken(os.Getenv(tokenEnv), "$"+tokenEnv)
		ts.token = tok
		return ts, err
	}
	_, err := ts.get()
	return ts, err
}

// get returns the token, from the file again if it changed since it was
// read. When a changed file cannot be read, the token read before is
// kept, with the error.
func (ts *tokenSource) get() (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.file == "" {
		return ts.token, nil
	}
	fi, err := os.Stat(ts.file)
	if err != nil {
		return ts.token, fmt.Errorf("-token-file: %w", err)
	}
	if ts.token != "" && fi.ModTime().Equal(ts.modTime) && fi.Size() == ts.size {
		return ts.token, nil
	}
	tok, err := readTokenFile(ts.file)
	if err != nil {
		return ts.token, err
	}
	ts.token, ts.modTime, ts.size = tok, fi.ModTime(), fi.Size()
	return tok, nil
}

func readTokenFile(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("-token-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxToken+1))
	if err != nil {
		return "", fmt.Errorf("-token-file: %w", err)
	}
	if len(b) > maxToken {
		return "", fmt.Errorf("-token-file %s: longer than %d bytes: not a token", file, maxToken)
	}
	return checkToken(string(b), filepath.Base(file))
}

// checkToken trims tok and checks that it looks like a token; src names
// where it came from, for the error (which never shows the token).
func checkToken(tok, src string) (string, error) {
	tok = strings.TrimSpace(tok)
	switch {
	case tok == "":
		return "", fmt.Errorf("no API token in %s: set $%s or give -token-file", src, tokenEnv)
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", fmt.Errorf("the API token in %s has white space inside: not a token", src)
	}
	return tok, nil
}

package ghfake

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Main runs a role of the fake runner in this process, in the current
// directory (the scripts cd into the runner directory), with the
// arguments its script was given, and returns the exit status: for
// [RoleConfig], config.sh's; for [RoleListener], the listener's, which
// stops cleanly on SIGINT or SIGTERM. An unknown role returns 2. A test
// binary's TestMain calls it when [RoleEnv] is set:
//
//	if role := os.Getenv(ghfake.RoleEnv); role != "" {
//		os.Exit(ghfake.Main(role, os.Args[1:]))
//	}
func Main(role string, args []string) int {
	switch role {
	case RoleConfig:
		return configure(".", args, os.Environ(), os.Stdout)
	case RoleListener:
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return listen(ctx, ".", os.Stdout)
	}
	fmt.Fprintf(os.Stderr, "ghfake: unknown role %q: want %q or %q\n", role, RoleConfig, RoleListener)
	return 2
}

// Files the runner keeps its registration in, as actions/runner does.
const (
	runnerFile         = ".runner"
	migratedRunnerFile = ".runner_migrated"
	credentialsFile    = ".credentials"
	rsaParamsFile      = ".credentials_rsaparams"
)

// bom starts the runner's JSON files, which .NET writes in UTF-8 with a
// byte order mark.
const bom = "\ufeff"

// configure is config.sh: it registers the runner in dir with the server
// and writes .runner and .credentials. It takes the options that args
// lack from environ (KEY=VALUE entries; see [InputEnvPrefix]), and warns
// about the options it does not know, and goes on, as the real one does.
func configure(dir string, args, environ []string, out io.Writer) int {
	a := parseConfigArgs(args, environ)
	if len(a.unknown) > 0 {
		fmt.Fprintf(out, "Unrecognized command-line input arguments: '%s'. "+
			"For usage refer to: .\\config.cmd --help or ./config.sh --help\n", strings.Join(a.unknown, ", "))
	}
	if a.removing() {
		fmt.Fprintf(out, "ghfake: 'config.sh remove' is not implemented: remove %s and %s instead\n", runnerFile, credentialsFile)
		return 1
	}
	fmt.Fprint(out, banner)
	if configured(dir) {
		fmt.Fprintln(out, "Cannot configure the runner because it is already configured. "+
			"To reconfigure the runner, run 'config.cmd remove' or './config.sh remove' first.")
		return 1
	}
	root, scope, err := splitConfigURL(a.url)
	if err != nil {
		fmt.Fprintln(out, "Invalid configuration provided for url. Terminating unattended configuration.")
		return 1
	}
	if a.token == "" {
		fmt.Fprintln(out, "Invalid configuration provided for token. Terminating unattended configuration.")
		return 1
	}
	if a.name == "" {
		a.name, _ = os.Hostname()
	}
	fmt.Fprint(out, "# Authentication\n\n")
	reg, err := register(root, registerRequest{
		Scope: scope, Token: a.token, Name: a.name, Labels: strings.Split(a.labels, ","),
		Replace: a.replace, Ephemeral: a.ephemeral,
	})
	if err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	return saveConfig(dir, root, a, reg, out)
}

// configured reports whether the runner in dir is configured, as the real
// config.sh sees it: .runner or .runner_migrated (which a runner that
// GitHub migrated keeps) is there. A file that cannot be looked at counts
// as there.
func configured(dir string) bool {
	for _, name := range []string{runnerFile, migratedRunnerFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
}

// banner is what config.sh prints first.
const banner = `
--------------------------------------------------------------------------------
|                  GitHub Actions (ghfake's fake runner)                       |
|                       Self-hosted runner registration                        |
--------------------------------------------------------------------------------

`

// splitConfigURL splits config.sh's --url, http(s)://HOST/OWNER/REPO or
// http(s)://HOST/ORG, into the server's root and the scope.
func splitConfigURL(raw string) (root, scope string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", err
	}
	scope = strings.Trim(u.Path, "/")
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !validScope(scope) {
		return "", "", fmt.Errorf("not a repository's or organisation's URL: %q", raw)
	}
	return u.Scheme + "://" + u.Host, scope, nil
}

// register asks the server at root for a registration.
func register(root string, req registerRequest) (*registerResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: newTransport()}
	defer c.CloseIdleConnections()
	resp, err := c.Post(root+"/_fake/register", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, runnerMsgf("An error occurred: %v", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusCreated:
		var reg registerResponse
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxRequest)).Decode(&reg); err != nil {
			return nil, runnerMsgf("An error occurred: %v", err)
		}
		return &reg, nil
	case http.StatusNotFound:
		return nil, runnerMsgf("Http response code: NotFound from 'POST %s/api/v3/actions/runner-registration'\n"+
			"Response status code does not indicate success: 404 (Not Found).", root)
	case http.StatusConflict:
		return nil, runnerMsgf("# Runner Registration\n\nA runner exists with the same name")
	}
	return nil, runnerMsgf("An error occurred: %v", answerError(resp))
}

// saveConfig writes the runner's files after its registration, and says
// so as the real config.sh does.
func saveConfig(dir, root string, a configArgs, reg *registerResponse, out io.Writer) int {
	fmt.Fprint(out, "\n√ Connected to GitHub\n\n# Runner Registration\n\n\n\n")
	if reg.Replaced {
		fmt.Fprint(out, "A runner exists with the same name\n√ Successfully replaced the runner\n")
	} else {
		fmt.Fprint(out, "√ Runner successfully added\n")
	}
	fmt.Fprint(out, "√ Runner connection is good\n\n# Runner settings\n\n\n")
	if err := writeConfigFiles(dir, root, a, reg); err != nil {
		fmt.Fprintf(out, "An error occurred: %v\n", err)
		return 1
	}
	fmt.Fprint(out, "√ Settings Saved.\n\n")
	return 0
}

// runnerConfig is .runner.
type runnerConfig struct {
	AgentID    int64  `json:"agentId"`
	AgentName  string `json:"agentName"`
	PoolID     int    `json:"poolId"`
	PoolName   string `json:"poolName"`
	ServerURL  string `json:"serverUrl"`
	GitHubURL  string `json:"gitHubUrl"`
	WorkFolder string `json:"workFolder"`
	Ephemeral  bool   `json:"ephemeral,omitempty"`
}

// credentials is .credentials.
type credentials struct {
	Scheme string `json:"scheme"`
	Data   struct {
		ClientID                string `json:"clientId"`
		AuthorizationURL        string `json:"authorizationUrl"`
		RequireFipsCryptography string `json:"requireFipsCryptography"`
	} `json:"data"`
}

// pipelinesPath is the runner service's path under the server's root,
// in .runner's serverUrl.
const pipelinesPath = "/_services/pipelines"

// writeConfigFiles writes .runner, .credentials and
// .credentials_rsaparams, as the real config.sh does.
func writeConfigFiles(dir, root string, a configArgs, reg *registerResponse) error {
	rc := runnerConfig{
		AgentID: reg.ID, AgentName: reg.Name, PoolID: 1, PoolName: "Default",
		ServerURL: root + pipelinesPath, GitHubURL: a.url, WorkFolder: a.work, Ephemeral: a.ephemeral,
	}
	var cred credentials
	cred.Scheme = "OAuth"
	cred.Data.ClientID = reg.Secret
	cred.Data.AuthorizationURL = root + "/_apis/oauth2/token"
	cred.Data.RequireFipsCryptography = "False"
	rsa := map[string]string{"exponent": "AQAB"}
	for _, k := range []string{"d", "dp", "dq", "inverseQ", "modulus", "p", "q"} {
		rsa[k] = base64.StdEncoding.EncodeToString([]byte(newUUID()))
	}
	files := []struct {
		name string
		v    any
		perm fs.FileMode
	}{{runnerFile, rc, 0o644}, {credentialsFile, cred, 0o600}, {rsaParamsFile, rsa, 0o600}}
	for _, f := range files {
		b, err := json.MarshalIndent(f.v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), append([]byte(bom), b...), f.perm); err != nil {
			return err
		}
	}
	return nil
}

// readJSONFile reads one of the runner's JSON files into v.
func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(bytes.TrimPrefix(b, []byte(bom)), v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// answerError is the error of a private endpoint's answer.
func answerError(resp *http.Response) error {
	var e apiError
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxRequest))
	if json.Unmarshal(b, &e) != nil || e.Message == "" {
		e.Message = strings.TrimSpace(string(b))
	}
	switch resp.StatusCode {
	case http.StatusForbidden:
		return &deniedError{msg: e.Message}
	case http.StatusConflict:
		return &conflictError{msg: e.Message}
	}
	return fmt.Errorf("%s: %s", resp.Status, e.Message)
}

// A deniedError is the server's refusal of a runner's credential: the
// registration is unknown or was removed.
type deniedError struct{ msg string }

func (e *deniedError) Error() string { return "access denied: " + e.msg }

// A conflictError is the server's refusal of a second session for a
// runner whose listener holds one.
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

// A runnerMsg is an error whose text is the real runner's message, word
// for word (capitals and full stop included).
type runnerMsg string

func (m runnerMsg) Error() string { return string(m) }

func runnerMsgf(format string, args ...any) error { return runnerMsg(fmt.Sprintf(format, args...)) }

package ghfake

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RoleEnv is the environment variable that the fake runner's scripts set
// to the role in which they run the test binary: [RoleConfig] or
// [RoleListener]. A TestMain that finds it set calls [Main].
const RoleEnv = "GHFAKE_ROLE"

// Roles of the test binary in the fake runner.
const (
	RoleConfig   = "config"   // config.sh: registers the runner
	RoleListener = "listener" // the listener that run.sh runs
)

// The scripts are laid out like actions/runner's: run.sh runs
// run-helper.sh again while the listener asks to be restarted (exit 2);
// run-helper.sh runs the listener and says how it ended. Neither traps a
// signal: SIGINT to run.sh's process group reaches the listener, which
// exits 0 after a clean stop, so that bash goes on. GORACE's
// atexit_sleep_ms=0 spares a test binary built with -race the race
// detector's second of sleep at exit; options already in GORACE win.
const (
	configScript = `#!/bin/bash
# config.sh of ghfake's fake GitHub Actions runner.
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" >/dev/null 2>&1 && pwd)"
cd "$SCRIPT_DIR" || exit 1
GORACE="atexit_sleep_ms=0 ${GORACE:-}" ` + RoleEnv + `=` + RoleConfig + ` exec %s "$@"
`
	runScript = `#!/bin/bash
# run.sh of ghfake's fake GitHub Actions runner.
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" >/dev/null 2>&1 && pwd)"
cd "$SCRIPT_DIR" || exit 1
while :; do
    "$SCRIPT_DIR"/run-helper.sh "$@"
    returnCode=$?
    if [[ $returnCode -eq 2 ]]; then
        echo "Restarting runner..."
    else
        echo "Exiting runner..."
        exit $returnCode
    fi
done
`
	runHelperScript = `#!/bin/bash
# run-helper.sh of ghfake's fake GitHub Actions runner.
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" >/dev/null 2>&1 && pwd)"
cd "$SCRIPT_DIR" || exit 1
GORACE="atexit_sleep_ms=0 ${GORACE:-}" ` + RoleEnv + `=` + RoleListener + ` %s run "$@"
returnCode=$?
if [[ $returnCode -eq 2 ]]; then
    echo "Runner listener exit with retryable error, re-launch runner."
    exit 2
fi
echo "Runner listener exit with $returnCode return code, stop the service, no retry needed."
exit $returnCode
`
)

// WriteRunnerDir writes the fake runner into dir, made if missing:
// executable config.sh, run.sh and run-helper.sh, which run exe (a test
// binary whose TestMain calls [Main]; a relative path is made absolute)
// with [RoleEnv] set. Scripts already there are overwritten; .runner and
// .credentials are left alone.
func WriteRunnerDir(dir, exe string) error {
	if exe == "" {
		return errors.New("ghfake: WriteRunnerDir: no executable")
	}
	exe, err := filepath.Abs(exe)
	if err != nil {
		return fmt.Errorf("ghfake: WriteRunnerDir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("ghfake: WriteRunnerDir: %w", err)
	}
	files := []struct{ name, text string }{
		{"config.sh", fmt.Sprintf(configScript, shellQuote(exe))},
		{"run.sh", runScript},
		{"run-helper.sh", fmt.Sprintf(runHelperScript, shellQuote(exe))},
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, []byte(f.text), 0o755); err != nil {
			return fmt.Errorf("ghfake: WriteRunnerDir: %w", err)
		}
		if err := os.Chmod(path, 0o755); err != nil { // WriteFile keeps an old file's mode
			return fmt.Errorf("ghfake: WriteRunnerDir: %w", err)
		}
	}
	return nil
}

// shellQuote quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

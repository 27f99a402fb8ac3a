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

// The scripts are laid out like actions/runner's. run-helper.sh runs the
// listener once and turns its exit status into run.sh's verdict, as the
// real one does: 0 (stopped), 1 (a terminal error), 5 (a session
// conflict) and any unknown status stop the runner, and run-helper.sh
// exits 0; 2 (a retryable error), 3 and 4 (an update) ask for a restart,
// and run-helper.sh exits 2. run.sh runs run-helper.sh again while it
// exits 2, and otherwise exits 0 whatever the listener's status was, as
// the real run.sh does: only a signal that kills it gives another status.
// Neither traps a signal: SIGINT to run.sh's process group reaches the
// listener, which exits 0 after a clean stop, so that bash goes on.
// GORACE's atexit_sleep_ms=0 spares a test binary built with -race the
// race detector's second of sleep at exit; options already in GORACE win.
const (
	configScript = `#!/bin/bash
# config.sh of ghfake's fake GitHub Actions runner.
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" >/dev/null 2>&1 && pwd)"
cd "$SCRIPT_DIR" || exit 1
GORACE="atexit_sleep_ms=0 ${GORACE:-}" ` + RoleEnv + `=` + RoleConfig + ` exec %s "$@"
`
	runScript = `#!/bin/bash
# run.sh of ghfake's fake GitHub Actions runner: runs run-helper.sh until it
# stops asking for a restart (status 2), then exits 0.
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" >/dev/null 2>&1 && pwd)"
cd "$SCRIPT_DIR" || exit 1
while :; do
    "$SCRIPT_DIR"/run-helper.sh "$@"
    if [[ $? -ne 2 ]]; then
        echo "Exiting runner..."
        exit 0
    fi
    echo "Restarting runner..."
done
`
	// The real run-helper.sh waits 5 seconds before it asks for a restart,
	// and up to 30 for an update to finish; the fake skips both waits (its
	// listener never exits 2, 3 or 4 by itself, nor updates itself), so
	// that a test does not wait for nothing.
	runHelperScript = `#!/bin/bash
# run-helper.sh of ghfake's fake GitHub Actions runner: runs the listener
# once and says what its exit status means.
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" >/dev/null 2>&1 && pwd)"
cd "$SCRIPT_DIR" || exit 1
GORACE="atexit_sleep_ms=0 ${GORACE:-}" ` + RoleEnv + `=` + RoleListener + ` %s run "$@"
code=$?
case $code in
0)  echo "Runner listener exit with 0 return code, stop the service, no retry needed." ;;
1)  echo "Runner listener exit with terminated error, stop the service, no retry needed." ;;
2)  echo "Runner listener exit with retryable error, re-launch runner in 5 seconds."
    exit 2 ;;
3|4) echo "Runner listener exit because of updating, re-launch runner after successful update"
    exit 2 ;;
5)  echo "Runner listener exit with Session Conflict error, stop the service, no retry needed." ;;
*)  echo "Exiting with unknown error code: ${code}" ;;
esac
exit 0
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

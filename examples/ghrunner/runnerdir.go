//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// runnerFile is the runner's own record of its registration, written by
// config.sh.
const runnerFile = ".runner"

// configFiles are what config.sh writes (the _migrated ones after GitHub
// moved the runner to its new broker); config.sh refuses to run while
// .runner or .runner_migrated is there ("already configured").
var configFiles = []string{runnerFile, runnerFile + "_migrated", ".credentials", ".credentials_migrated", ".credentials_rsaparams"}

// maxRunnerFile bounds what is read of .runner (a few hundred bytes).
const maxRunnerFile = 64 << 10

// A registration is what .runner says.
type registration struct {
	ID   int64  `json:"agentId"`
	Name string `json:"agentName"`
	URL  string `json:"gitHubUrl"`
}

// readRegistration reads dir/.runner (or .runner_migrated). The runner
// writes it in UTF-8 with a byte order mark, as .NET does. A missing file
// is (nil, nil).
func readRegistration(dir string) (*registration, error) {
	f, err := os.Open(filepath.Join(dir, runnerFile))
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(filepath.Join(dir, runnerFile+"_migrated"))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRunnerFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", runnerFile, err)
	}
	return parseRegistration(b)
}

func parseRegistration(b []byte) (*registration, error) {
	if len(b) > maxRunnerFile {
		return nil, fmt.Errorf("%s is larger than %d bytes: not the runner's", runnerFile, maxRunnerFile)
	}
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	var r registration
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", runnerFile, err)
	}
	if r.ID <= 0 {
		return nil, fmt.Errorf("%s: no agentId", runnerFile)
	}
	return &r, nil
}

// clearConfig removes the files of an earlier registration, which has
// been removed from GitHub, so that config.sh makes a new one.
func clearConfig(dir string) error {
	for _, name := range configFiles {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// configure runs config.sh to register the runner with token, and returns
// the new registration from .runner. config.sh's output goes to out. The
// token goes in config.sh's environment (ACTIONS_RUNNER_INPUT_TOKEN, which
// the runner reads for a missing --token and then removes), not on its
// command line, which every local user can read.
func (g *ghrunner) configure(ctx context.Context, token string) (*registration, error) {
	o := g.o
	args := []string{"--unattended", "--url", o.configURL, "--name", o.name, "--replace"}
	if o.labels != "" {
		args = append(args, "--labels", o.labels)
	}
	if o.ephemeral {
		args = append(args, "--ephemeral")
	}
	g.log.Info("ghrunner: configuring the runner", "url", o.configURL, "name", o.name, "labels", o.labels, "ephemeral", o.ephemeral)
	cmd := exec.CommandContext(ctx, filepath.Join(o.runnerDir, "config.sh"), args...)
	cmd.Dir = o.runnerDir
	cmd.Env = append(childEnv(o.runAs), inputTokenEnv+"="+token)
	cmd.Stdout, cmd.Stderr = g.out, g.out
	cmd.SysProcAttr = o.runAs.sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("config.sh: %w (%w)", err, context.Cause(ctx))
		}
		return nil, fmt.Errorf("config.sh: %w", err)
	}
	reg, err := readRegistration(o.runnerDir)
	if err == nil && reg == nil {
		err = fmt.Errorf("config.sh succeeded but wrote no %s", runnerFile)
	}
	return reg, err
}

// inputTokenEnv is where config.sh finds the registration token.
const inputTokenEnv = "ACTIONS_RUNNER_INPUT_TOKEN"

// notPassedOn are the variables of ghrunner's environment that config.sh
// and run.sh do not get: the API token and where systemd keeps its file,
// which every job would see; RUNNER_MANUALLY_TRAP_SIG, which would put the
// listener in a process group of its own, out of reach of ghrunner's
// SIGKILL to run.sh's; and the runner's own inputs.
var notPassedOn = []string{tokenEnv + "=", "CREDENTIALS_DIRECTORY=", "RUNNER_MANUALLY_TRAP_SIG=", "ACTIONS_RUNNER_INPUT_"}

// childEnv is ghrunner's environment for config.sh and run.sh, less
// notPassedOn, with HOME, USER and LOGNAME of -user's.
func childEnv(as *runAs) []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, p := range notPassedOn {
			keep = keep && !strings.HasPrefix(kv, p)
		}
		if as != nil && (strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "USER=") || strings.HasPrefix(kv, "LOGNAME=")) {
			keep = false
		}
		if keep {
			env = append(env, kv)
		}
	}
	if as != nil {
		env = append(env, "HOME="+as.home, "USER="+as.name, "LOGNAME="+as.name)
	}
	return env
}

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

// configFiles are what config.sh writes; config.sh refuses to run while
// .runner is there ("already configured").
var configFiles = []string{runnerFile, ".credentials", ".credentials_rsaparams"}

// maxRunnerFile bounds what is read of .runner (a few hundred bytes).
const maxRunnerFile = 64 << 10

// A registration is what .runner says.
type registration struct {
	ID   int64  `json:"agentId"`
	Name string `json:"agentName"`
	URL  string `json:"gitHubUrl"`
}

// readRegistration reads dir/.runner. The runner writes it in UTF-8 with
// a byte order mark, as .NET does. A missing file is (nil, nil).
func readRegistration(dir string) (*registration, error) {
	f, err := os.Open(filepath.Join(dir, runnerFile))
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
// the new registration from .runner. config.sh's output goes to out; the
// token is not logged.
func (g *ghrunner) configure(ctx context.Context, token string) (*registration, error) {
	o := g.o
	args := []string{"--unattended", "--url", o.configURL, "--token", token, "--name", o.name, "--replace"}
	if o.labels != "" {
		args = append(args, "--labels", o.labels)
	}
	if o.ephemeral {
		args = append(args, "--ephemeral")
	}
	g.log.Info("ghrunner: configuring the runner", "url", o.configURL, "name", o.name, "labels", o.labels, "ephemeral", o.ephemeral)
	cmd := exec.CommandContext(ctx, filepath.Join(o.runnerDir, "config.sh"), args...)
	cmd.Dir = o.runnerDir
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = g.out, g.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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

// childEnv is ghrunner's environment for config.sh and run.sh, less the
// API token: every job the runner runs would see it.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, tokenEnv+"=") {
			env = append(env, kv)
		}
	}
	return env
}

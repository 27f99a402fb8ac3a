//go:build unix

package runner

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

// A Dir is an unpacked actions/runner release, with config.sh and run.sh.
type Dir struct {
	Path   string
	User   *User     // config.sh and run.sh run as this user; nil: as ghrunner's
	Output io.Writer // where config.sh's and run.sh's output goes; nil: discarded
	// OnJob, if set, is told what run.sh's listener says of its jobs: ""
	// when it takes one, the result ("Succeeded", "Canceled") when one
	// completes. It runs on the goroutine that reads run.sh's output,
	// after the Process's state has changed: it must return at once.
	OnJob func(result string)
}

func (d *Dir) output() io.Writer {
	if d.Output == nil {
		return io.Discard
	}
	return d.Output
}

// RegistrationFile is the runner's own record of its registration,
// written by config.sh.
const RegistrationFile = ".runner"

// configFiles are what config.sh writes (the _migrated ones after GitHub
// moved the runner to its new broker); config.sh refuses to run while
// .runner or .runner_migrated is there ("already configured").
var configFiles = []string{RegistrationFile, RegistrationFile + "_migrated", ".credentials", ".credentials_migrated", ".credentials_rsaparams"}

// maxRunnerFile bounds what is read of .runner (a few hundred bytes).
const maxRunnerFile = 64 << 10

// A Registration is what .runner says.
type Registration struct {
	ID   int64  `json:"agentId"`
	Name string `json:"agentName"`
	URL  string `json:"gitHubUrl"`
}

// Registration reads the directory's .runner (or .runner_migrated). The
// runner writes it in UTF-8 with a byte order mark, as .NET does. A
// missing file is (nil, nil).
func (d *Dir) Registration() (*Registration, error) {
	f, err := os.Open(filepath.Join(d.Path, RegistrationFile))
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(filepath.Join(d.Path, RegistrationFile+"_migrated"))
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
		return nil, fmt.Errorf("read %s: %w", RegistrationFile, err)
	}
	return parseRegistration(b)
}

func parseRegistration(b []byte) (*Registration, error) {
	if len(b) > maxRunnerFile {
		return nil, fmt.Errorf("%s is larger than %d bytes: not the runner's", RegistrationFile, maxRunnerFile)
	}
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	var r Registration
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", RegistrationFile, err)
	}
	if r.ID <= 0 {
		return nil, fmt.Errorf("%s: no agentId", RegistrationFile)
	}
	return &r, nil
}

// Clear removes the files of an earlier registration, which has been
// removed from GitHub, so that config.sh makes a new one.
func (d *Dir) Clear() error {
	for _, name := range configFiles {
		if err := os.Remove(filepath.Join(d.Path, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Options are config.sh's.
type Options struct {
	URL       string // the repository's or organisation's page
	Name      string // the runner's
	Labels    string // extra labels, comma-separated
	Ephemeral bool   // the runner takes one job
}

// Configure runs config.sh to register the runner with token, replacing a
// registration of the same name, and returns the new registration from
// .runner. When ctx ends, config.sh's process group is killed. The token
// goes in config.sh's environment (ACTIONS_RUNNER_INPUT_TOKEN, which the
// runner reads for a missing --token and then removes), not on its
// command line, which every local user can read.
func (d *Dir) Configure(ctx context.Context, token string, o Options) (*Registration, error) {
	args := []string{"--unattended", "--url", o.URL, "--name", o.Name, "--replace"}
	if o.Labels != "" {
		args = append(args, "--labels", o.Labels)
	}
	if o.Ephemeral {
		args = append(args, "--ephemeral")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(d.Path, "config.sh"), args...)
	cmd.Dir = d.Path
	cmd.Env = append(childEnv(d.User), inputTokenEnv+"="+token)
	cmd.Stdout, cmd.Stderr = d.output(), d.output()
	cmd.SysProcAttr = d.User.sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("config.sh: %w (%w)", err, context.Cause(ctx))
		}
		return nil, fmt.Errorf("config.sh: %w", err)
	}
	reg, err := d.Registration()
	if err == nil && reg == nil {
		err = fmt.Errorf("config.sh succeeded but wrote no %s", RegistrationFile)
	}
	return reg, err
}

// inputTokenEnv is where config.sh finds the registration token.
const inputTokenEnv = "ACTIONS_RUNNER_INPUT_TOKEN"

// withheld are the variables of ghrunner's environment that config.sh
// and run.sh do not get: the API token ($GITHUB_TOKEN) and where systemd
// keeps its file, which every job would see; RUNNER_MANUALLY_TRAP_SIG,
// which would put the listener in a process group of its own, out of reach
// of the SIGKILL to run.sh's; and the runner's own inputs.
var withheld = []string{"GITHUB_TOKEN=", "CREDENTIALS_DIRECTORY=", "RUNNER_MANUALLY_TRAP_SIG=", "ACTIONS_RUNNER_INPUT_"}

// childEnv is ghrunner's environment for config.sh and run.sh, less
// withheld, with HOME, USER and LOGNAME of as's.
func childEnv(as *User) []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, p := range withheld {
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
		env = append(env, "HOME="+as.Home, "USER="+as.Name, "LOGNAME="+as.Name)
	}
	return env
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig/imds/imdstest"
)

// A procSample is what /proc shows of a process at one moment (see
// sampleProc).
type procSample struct {
	cpu      time.Duration // on CPU so far, every thread together
	rss, hwm int64         // resident memory now, and its peak, in bytes
}

// errNoProc says that the idle CPU and memory are measured from Linux's
// /proc only: sampleProc returns it elsewhere.
var errNoProc = errors.New("idle CPU and RSS are measured on Linux only")

// notifyPackage is the program whose idle cost is measured.
const notifyPackage = "github.com/termsig/termsig/examples/notices"

// buildNotify builds examples/notices into dir with the go command, and
// returns the binary's path.
func buildNotify(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "notify")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, notifyPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", notifyPackage, err, out)
	}
	return bin, nil
}

// serveIMDS is the fake IMDS process: it serves an imdstest.Server,
// writes its URL as the first line of out, answers each line of in with
// the requests it has answered so far, and returns at the end of in.
func serveIMDS(in io.Reader, out io.Writer) error {
	srv := imdstest.NewServer()
	defer srv.Close()
	if _, err := fmt.Fprintln(out, srv.URL); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if _, err := fmt.Fprintln(out, imdsRequests(srv)); err != nil {
			return err
		}
	}
	return sc.Err()
}

// A fakeProcess is this command started again as a fake IMDS (see
// serveIMDS), so that the fake's CPU is not examples/notices's, nor
// the bench's.
type fakeProcess struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	url string
}

// startFake starts the fake IMDS process and reads its URL.
func startFake(ctx context.Context) (*fakeProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &fakeProcess{cmd: cmd, in: in, out: bufio.NewReader(out)}
	if f.url, err = f.readLine(); err != nil {
		f.close()
		return nil, fmt.Errorf("fake IMDS process: %w", err)
	}
	return f, nil
}

// readLine reads the fake's next line.
func (f *fakeProcess) readLine() (string, error) {
	line, err := f.out.ReadString('\n')
	return strings.TrimSpace(line), err
}

// requests asks the fake how many requests it has answered.
func (f *fakeProcess) requests() (int, error) {
	if _, err := io.WriteString(f.in, "requests\n"); err != nil {
		return 0, err
	}
	line, err := f.readLine()
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(line)
}

// close ends the fake's input, and waits for it to exit.
func (f *fakeProcess) close() error {
	f.in.Close()
	return f.cmd.Wait()
}

// notifyIdle is what notifyStage measures.
type notifyIdle struct {
	watching string        // the sources notify watches, as it prints them
	window   time.Duration // how long the CPU was measured
	cpu      time.Duration // the CPU time it used in window
	rss, hwm int64         // its resident memory at the end, and the peak, in bytes
	requests float64       // per second, at the fake
}

// notifyStage runs examples/notices (bin) and the references side by
// side, each against a fake IMDS of its own in another process, and
// measures their CPU over o.idle after o.warmup, and their memory. The
// first result is notify's, then the references' in order.
func notifyStage(ctx context.Context, o options, bin string) ([]notifyIdle, error) {
	cmds := []func(url string) (*exec.Cmd, error){func(url string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(os.Environ(), "AWS_EC2_METADATA_SERVICE_ENDPOINT="+url)
		return cmd, nil
	}}
	for _, r := range references {
		cmds = append(cmds, func(url string) (*exec.Cmd, error) { return referenceCommand(ctx, r.name, url) })
	}
	res := make([]notifyIdle, len(cmds))
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for i, mk := range cmds {
		wg.Go(func() { res[i], errs[i] = idleRun(ctx, o, mk) })
	}
	wg.Wait()
	return res, errors.Join(errs...)
}

// idleRun runs the command that mk makes against a fake IMDS in another
// process, and measures it.
func idleRun(ctx context.Context, o options, mk func(url string) (*exec.Cmd, error)) (notifyIdle, error) {
	var res notifyIdle
	fake, err := startFake(ctx)
	if err != nil {
		return res, err
	}
	defer fake.close()
	cmd, err := mk(fake.url)
	if err != nil {
		return res, err
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		return res, err
	}
	err = measureIdle(ctx, o, cmd.Process.Pid, fake, &res)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// "pid 123: watching signal imds acpi; press Ctrl-C to stop"
	first, _, _ := strings.Cut(stdout.String(), ";")
	_, res.watching, _ = strings.Cut(first, ": ")
	return res, err
}

// measureIdle measures the process pid, which polls fake, into res.
func measureIdle(ctx context.Context, o options, pid int, fake *fakeProcess, res *notifyIdle) error {
	if err := pause(ctx, o.warmup); err != nil {
		return err
	}
	s0, r0, err := snapshot(pid, fake)
	if err != nil {
		return err
	}
	began := time.Now()
	if err := pause(ctx, o.idle); err != nil {
		return err
	}
	s1, r1, err := snapshot(pid, fake)
	res.window = time.Since(began)
	res.cpu, res.rss, res.hwm = s1.cpu-s0.cpu, s1.rss, s1.hwm
	res.requests = float64(r1-r0) / res.window.Seconds()
	return err
}

// snapshot samples the process pid, and the requests fake has answered.
func snapshot(pid int, fake *fakeProcess) (procSample, int, error) {
	s, err := sampleProc(pid)
	if err != nil {
		return s, 0, err
	}
	r, err := fake.requests()
	return s, r, err
}

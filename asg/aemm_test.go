package asg_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/asg"
	"github.com/termsig/termsig/asg/asgtest"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/internal/testlog"
)

// aemmVersion is the amazon-ec2-metadata-mock that the IMDS side is tried
// against.
const aemmVersion = "v1.13.0"

// aemmInstance is the instance id that amazon-ec2-metadata-mock serves.
const aemmInstance = "i-1234567890abcdef0"

var aemm struct {
	once sync.Once
	path string
	err  error
}

// aemmBinary builds amazon-ec2-metadata-mock from the Go module proxy, once
// per test binary (the build cache makes it quick after the first time).
func aemmBinary(t *testing.T) string {
	t.Helper()
	aemm.once.Do(func() {
		dir, err := os.MkdirTemp("", "aemm")
		if err != nil {
			aemm.err = err
			return
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		cmd := exec.Command("go", "install",
			"github.com/aws/amazon-ec2-metadata-mock/cmd/ec2-metadata-mock@"+aemmVersion)
		// The go command's caches are under the real HOME, which the
		// tests replaced.
		cmd.Env = append(os.Environ(), "HOME="+realHome, "GOBIN="+dir, "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			aemm.err = &buildError{err, string(out)}
			return
		}
		aemm.path = filepath.Join(dir, "ec2-metadata-mock")
	})
	require.NoError(t, aemm.err, "building amazon-ec2-metadata-mock %s from the module proxy", aemmVersion)
	return aemm.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// startAEMM runs amazon-ec2-metadata-mock's asglifecycle mode, IMDSv2 only,
// on a loopback port, with the target lifecycle state turning Terminated
// delay after it starts, and returns its endpoint once it answers.
func startAEMM(t *testing.T, delay time.Duration) string {
	t.Helper()
	bin := aemmBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(bin, "asglifecycle", "-n", "127.0.0.1", "-p", port, "-I",
		"--asg-termination-delay-sec", strconv.Itoa(int(delay/time.Second)))
	cmd.Dir = t.TempDir() // it looks for a config file there and in $HOME
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	lines := make(chan string, 64)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case lines <- s.Text():
			default:
			}
		}
		close(lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for range lines {
		}
	})
	endpoint := "http://127.0.0.1:" + port
	// It prints its routes before it listens: wait for the socket.
	deadline := time.Now().Add(wait)
	for {
		req, _ := http.NewRequest(http.MethodPut, endpoint+"/latest/api/token", nil)
		req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			return endpoint
		}
		if time.Now().After(deadline) {
			t.Fatalf("amazon-ec2-metadata-mock did not answer on %s within %v", endpoint, wait)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case _, ok := <-lines:
			if !ok {
				t.Fatal("amazon-ec2-metadata-mock exited before it answered")
			}
		}
	}
}

// Against amazon-ec2-metadata-mock's asglifecycle mode for the IMDS side
// (IMDSv2 tokens, the lifecycle state turning Terminated, its instance id,
// its instance profile's credentials and its identity document's region),
// and asgtest for the API: the scale-in is one held Terminate, and Release
// completes the hook.
func TestScaleInFromAmazonEC2MetadataMockIsHeld(t *testing.T) {
	endpoint := startAEMM(t, 2*time.Second)
	api := asgtest.NewServer()
	t.Cleanup(api.Close)
	api.AddGroup(group, asgtest.Hook{Name: hookName, HeartbeatTimeout: 30 * time.Second})
	api.AddInstance(aemmInstance, group)
	require.NoError(t, api.ScaleIn(aemmInstance)) // the API's side of what the mock will show
	log := testlog.New()
	src := asg.New(asg.Config{
		IMDS:     imds.Config{Endpoint: endpoint, Interval: 50 * time.Millisecond, AdvisoryInterval: 50 * time.Millisecond},
		Endpoint: api.URL,
		Logger:   log.Logger(),
	})
	n := termsig.Config{Logger: log.Logger()}.New(src)
	defer n.Stop()
	var nt termsig.Notice
	select {
	case nt = <-n.C():
	case <-time.After(wait):
		t.Fatalf("no notice (status: %+v)", n.Status())
	}
	assert.Equal(t, asg.Event, nt.Event)
	assert.True(t, nt.Held, "%v", nt)
	assert.Equal(t, "Terminated", nt.Raw)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, n.Release(ctx, nt))
	var done []asgtest.Call
	for _, c := range api.Calls() {
		if c.Action == "CompleteLifecycleAction" && c.Err == "" {
			done = append(done, c)
		}
	}
	require.Len(t, done, 1)
	assert.Equal(t, aemmInstance, done[0].InstanceID)
}

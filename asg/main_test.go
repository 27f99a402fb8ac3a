package asg_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/asg"
	"github.com/termsig/termsig/asg/asgtest"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/testlog"
)

func TestMain(m *testing.M) {
	// The SDK reads the environment and ~/.aws: the tests see neither
	// this machine's credentials nor its region, only the fakes'.
	home, err := os.MkdirTemp("", "asg-test-home")
	if err != nil {
		panic(err)
	}
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
		"AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_AUTO_SCALING", "AWS_EC2_METADATA_DISABLED",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		os.Unsetenv(v)
	}
	realHome = os.Getenv("HOME")
	os.Setenv("HOME", home)
	os.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "none"))
	os.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "none"))
	goleak.VerifyTestMain(cleanup{m, home})
}

// cleanup runs the tests for goleak, which exits the process, and removes
// the temporary home before that.
type cleanup struct {
	m    *testing.M
	home string
}

func (c cleanup) Run() int {
	defer os.RemoveAll(c.home)
	defer func() {
		for _, f := range cleanups {
			f()
		}
	}()
	return c.m.Run()
}

// realHome is HOME before the tests replaced it: the go command's caches
// are under it.
var realHome string

// cleanups run once the tests are over, before goleak exits.
var cleanups []func()

// wait bounds how long a test waits for what should come quickly.
const wait = 10 * time.Second

// group and hook are the fake group's names.
const (
	group    = "workers"
	hookName = "termsig"
	role     = "worker-role"
)

// An env is an asg source against a fake IMDS and a fake Auto Scaling API.
type env struct {
	t    *testing.T
	imds *imdstest.Server
	api  *asgtest.Server
	src  *asg.Source
	n    *termsig.Notifier
	log  *testlog.Recorder
	cfg  asg.Config
}

// opts shape an env.
type opts struct {
	hooks    []asgtest.Hook // nil: one hook of 1 s
	noHook   bool
	cfg      func(*asg.Config)
	before   func(*env)     // before the source starts
	notifier termsig.Config // its Logger is the env's
}

// start sets up an env and watches its source.
func start(t *testing.T, o opts) *env {
	t.Helper()
	e := setUp(t, o)
	e.src = asg.New(e.cfg)
	nc := o.notifier
	nc.Logger = e.log.Logger()
	e.n = nc.New(e.src)
	t.Cleanup(e.n.Stop)
	select {
	case <-e.n.Ready():
	case <-time.After(wait):
		t.Fatal("the source was not ready")
	}
	return e
}

// setUp starts the fakes of an env, and sets its Config.
func setUp(t *testing.T, o opts) *env {
	t.Helper()
	e := &env{t: t, imds: imdstest.NewServer(), api: asgtest.NewServer(), log: testlog.New()}
	t.Cleanup(e.imds.Close)
	t.Cleanup(e.api.Close)
	e.imds.SetRole(role)
	e.imds.SetLifecycleState("InService")
	hooks := o.hooks
	if hooks == nil && !o.noHook {
		hooks = []asgtest.Hook{{Name: hookName, HeartbeatTimeout: time.Second, DefaultResult: "CONTINUE"}}
	}
	e.api.AddGroup(group, hooks...)
	e.api.AddInstance(imdstest.InstanceID, group)
	e.api.OnTargetState = func(id, state string) {
		if id == imdstest.InstanceID {
			e.imds.SetLifecycleState(state)
		}
	}
	cfg := asg.Config{
		IMDS: imds.Config{Endpoint: e.imds.URL, Interval: 10 * time.Millisecond, AdvisoryInterval: 10 * time.Millisecond,
			RequestTimeout: time.Second, MaxBackoff: 50 * time.Millisecond},
		Endpoint:       e.api.URL,
		RequestTimeout: time.Second,
		MaxBackoff:     50 * time.Millisecond,
		Logger:         e.log.Logger(),
	}
	cfg = asg.WithBackoffBase(cfg, 10*time.Millisecond)
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	e.cfg = cfg
	if o.before != nil {
		o.before(e)
	}
	return e
}

// next returns the next notice.
func (e *env) next() termsig.Notice {
	e.t.Helper()
	select {
	case nt := <-e.n.C():
		return nt
	case <-time.After(wait):
		e.t.Fatalf("no notice within %v (status: %+v)", wait, e.n.Status())
	}
	return termsig.Notice{}
}

// scaleIn scales the instance in and returns the first notice.
func (e *env) scaleIn() termsig.Notice {
	e.t.Helper()
	require.NoError(e.t, e.api.ScaleIn(imdstest.InstanceID))
	return e.next()
}

// release releases nt within 5 s.
func (e *env) release(nt termsig.Notice) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return e.n.Release(ctx, nt)
}

// calls returns the recorded calls of action, ok or not.
func (e *env) calls(action string, ok bool) []asgtest.Call {
	var cs []asgtest.Call
	for _, c := range e.api.Calls() {
		if c.Action == action && (c.Err == "") == ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// awaitCalls waits for n successful calls of action.
func (e *env) awaitCalls(action string, n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(e.t, e.api.AwaitCalls(ctx, action, n), "waiting for %d %s", n, action)
}

// sdk returns a client of the fake API, as another party (an operator, a
// script) would use.
func (e *env) sdk() *autoscaling.Client {
	return autoscaling.New(autoscaling.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.api.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
}

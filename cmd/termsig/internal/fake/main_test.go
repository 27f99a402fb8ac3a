package fake_test

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/cmd/termsig/internal/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait of these tests.
const wait = 5 * time.Second

var discard = slog.New(slog.DiscardHandler)

// output is what Main writes to stdout or stderr, as lines, which a test
// can wait for without sleeping.
type output struct {
	mu      sync.Mutex
	partial string
	lines   []string
	changed chan struct{} // closed and replaced on every write
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	parts := strings.Split(o.partial+string(p), "\n")
	o.lines = append(o.lines, parts[:len(parts)-1]...)
	o.partial = parts[len(parts)-1]
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

// String returns everything written.
func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(append(append([]string{}, o.lines...), o.partial), "\n")
}

// line returns line i.
func (o *output) line(i int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lines[i]
}

// await returns the first line that contains want, waiting for it.
func (o *output) await(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(wait)
	for {
		o.mu.Lock()
		lines, changed := o.lines, o.changed
		o.mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, want) {
				return l
			}
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no line with %q in:\n%s", want, o.String())
		}
	}
}

// A run is Main running in the background on 127.0.0.1:0.
type run struct {
	out, errs *output
	cancel    context.CancelFunc
	done      chan int
	once      sync.Once
	code      int
}

// start runs Main with args and the flag --listen 127.0.0.1:0 after them,
// so that tests in parallel never clash; the test's end stops it.
func start(t *testing.T, args ...string) *run {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{out: newOutput(), errs: newOutput(), cancel: cancel, done: make(chan int, 1)}
	args = append(args, "--listen", "127.0.0.1:0")
	go func() { r.done <- fake.Main(ctx, args, r.out, r.errs) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop ends Main's context and returns its exit status.
func (r *run) stop(t *testing.T) int {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case r.code = <-r.done:
		case <-time.After(2 * wait):
			t.Fatal("Main did not return after its context ended")
		}
	})
	return r.code
}

var readyLine = regexp.MustCompile(`^termsig fake (\w+): serving on (http://127\.0\.0\.1:\d+); export (\w+)=(\S+)$`)

// ready waits for the ready line, checks its form, and returns the URL it
// gives and the value of the variable it exports.
func (r *run) ready(t *testing.T, name, env string) (url, value string) {
	t.Helper()
	line := r.out.await(t, "serving on")
	m := readyLine.FindStringSubmatch(line)
	require.NotNil(t, m, "the ready line: %q", line)
	require.Equal(t, name, m[1])
	require.Equal(t, env, m[3])
	require.Equal(t, line, r.out.line(0), "the ready line comes first")
	return m[2], m[4]
}

// stamped returns the time at the start of a change line.
func stamped(t *testing.T, line string) time.Time {
	t.Helper()
	at, err := time.Parse("2006-01-02T15:04:05.000Z", strings.Fields(line)[0])
	require.NoError(t, err, line)
	return at
}

// notifier runs src under a Notifier until the test ends.
func notifier(t *testing.T, src termsig.Source) *termsig.Notifier {
	n := termsig.Config{Logger: discard}.New(src)
	t.Cleanup(n.Stop)
	return n
}

// receive returns the next notice of n for which match holds, skipping the
// others.
func receive(t *testing.T, n *termsig.Notifier, match func(termsig.Notice) bool) termsig.Notice {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case nt := <-n.C():
			if match(nt) {
				return nt
			}
		case <-timeout:
			t.Fatalf("no such notice; status: %+v", n.Status())
			return termsig.Notice{}
		}
	}
}

// event matches the notices of one Event.
func event(e string) func(termsig.Notice) bool {
	return func(nt termsig.Notice) bool { return nt.Event == e }
}

// ready waits until n's sources have had their first look.
func ready(t *testing.T, n *termsig.Notifier) {
	t.Helper()
	select {
	case <-n.Ready():
	case <-time.After(wait):
		t.Fatalf("the source never had its first look; status: %+v", n.Status())
	}
}

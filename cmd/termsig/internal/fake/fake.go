// Package fake is "termsig fake": the metadata service of EC2, GCE, Azure,
// Alibaba Cloud or Tencent Cloud, as termsig's own tests fake it (imdstest,
// gcemetatest, azuretest, alibabatest, tencenttest), served on a loopback
// port with an event scripted from flags, so that a program, or termsig
// print, hook and supervise, can be tried without a cloud.
package fake

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Exit statuses, as the other termsig commands have them.
const (
	exitOK     = 0
	exitFailed = 1 // the address cannot be had, or the server failed
	exitUsage  = 2
)

// shutdownTimeout bounds how long termsig fake waits, once its context
// ends, for the requests being answered.
const shutdownTimeout = 5 * time.Second

// Usage is the help of termsig fake, for "termsig fake -h" and for
// "termsig -h" to include.
const Usage = usageHead + "\n" + usageIMDS + "\n" + usageGCE + "\n" + usageAzure + "\n" + usageAlibaba + "\n" + usageTencent + "\n" + usageTail

const usageHead = `usage: termsig fake imds|gce|azure|alibaba|tencent [flags]

termsig fake serves a cloud's metadata service on a loopback port, the fake
that termsig's own tests use, and scripts an event on it from flags, to try
a program (or termsig print, hook, supervise) without a cloud. Without an
event flag it serves a quiet host. Durations are Go's (500ms, 10s, 2m); 0
means at once.
`

const usageIMDS = `termsig fake imds [flags]      EC2 instance metadata service (IMDSv2)
  --listen ADDR        where to serve (default 127.0.0.1:1338)
  --spot-in D          a spot interruption (spot/instance-action) D from now
  --action A           its action: terminate, stop or hibernate (default terminate)
  --notice D           its time, D after it appears (default 2m, as EC2 gives)
  --rebalance-in D     a rebalance recommendation D from now
  Try it:
    termsig fake imds --spot-in 10s &
    AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1338 termsig print --sources imds
`

const usageGCE = `termsig fake gce [flags]       Google Compute Engine metadata server
  --listen ADDR        where to serve (default 127.0.0.1:1339)
  --preempt-in D       a preemption D from now: instance/preempted turns TRUE (a
                       real VM also gets an ACPI soft-off, which the fake cannot
                       send, and is powered off 30s later)
  --maintenance-in D   host maintenance D from now: instance/maintenance-event
                       turns to the value of --maintenance, 60s before the event
  --maintenance V      MIGRATE_ON_HOST_MAINTENANCE (live migration) or
                       TERMINATE_ON_HOST_MAINTENANCE (the VM is stopped)
                       (default MIGRATE_ON_HOST_MAINTENANCE)
  Try it:
    termsig fake gce --preempt-in 10s &
    GCE_METADATA_HOST=127.0.0.1:1339 termsig print --sources gcemeta
`

const usageAzure = `termsig fake azure [flags]     Azure Scheduled Events
  --listen ADDR        where to serve (default 127.0.0.1:1340)
  --vm NAME            this VM's name: what the service says it is, and the
                       event's Resources (default termsig-vm)
  --event-in D         a scheduled event D from now
  --type T             Preempt, Reboot, Redeploy, Freeze or Terminate
                       (default Preempt)
  --notice D           its NotBefore, D after it appears (default Azure's
                       minimum notice for the type: Preempt 30s, Reboot 15m,
                       Redeploy 10m, Freeze 15m, Terminate 5m)
  An acknowledgement (POST {"StartRequests":[{"EventId":...}]}, which
  Notifier.Release sends) starts the event at once, as on Azure; NotBefore
  passing starts it too.
  Try it (the hook's end acknowledges the event):
    termsig fake azure --event-in 10s --type Reboot &
    AZURE_METADATA_ENDPOINT=http://127.0.0.1:1340 termsig hook --sources azure 'echo draining'
`

const usageTail = `It prints a ready line with the address and the environment variable that
points a source at it,
  termsig fake NAME: serving on URL; export VARIABLE=VALUE
then what is scheduled, then one line per change, each after its time (UTC):
the first request, the event appearing, an acknowledgement, the event's time.

The default ports are fixed, so that an export line works from one run to
the next: 1338 is amazon-ec2-metadata-mock's default, and 1339 to 1342
follow it. They need no privilege, no widely used service takes them, and
they are below the ports that Linux (32768 and up), macOS and Windows
(49152 and up) give outgoing connections, which therefore never hold them.
--listen 127.0.0.1:0 takes any free port.

Exit status: 0 once interrupted (SIGINT, SIGTERM); 1 if the address cannot be
had, such as a port in use (choose another with --listen); 2 for a bad flag.
`

// A kind is one of the fakes that termsig fake serves.
type kind struct {
	name   string // as on the command line
	listen string // the default --listen
	env    string // the variable that points a source at the fake
	usage  string
	// envValue returns what env is set to for the fake at base, such as
	// "http://127.0.0.1:1338".
	envValue func(base string) string
	// flags defines the fake's flags on fs and returns the function that
	// checks them once parsed (set: the flags given) and makes the script.
	flags func(fs *flag.FlagSet) func(set map[string]bool) (script, error)
}

// kinds are the fakes, by name.
var kinds = map[string]kind{
	"imds":    imdsKind,
	"gce":     gceKind,
	"azure":   azureKind,
	"alibaba": alibabaKind,
	"tencent": tencentKind,
}

// A script is a fake's parsed flags, ready to start.
type script interface {
	// start makes the fake, with the events scheduled from t0.
	start(t0 time.Time) *running
}

// running is a fake that is being served.
type running struct {
	handler http.Handler
	close   func()
	plan    string // what is scheduled, after the ready line
	steps   []step // in the order of their times
	// watch, if not nil, reports what clients do (acknowledgements) with
	// emit until ctx ends.
	watch func(ctx context.Context, emit func(string))
}

// A step is one scripted change: at its time, do makes it and returns the
// line that says so ("" for none).
type step struct {
	at time.Time
	do func() string
}

// Main runs termsig fake with args, the arguments after "fake" (such as
// "imds", "--spot-in", "10s"), and returns the exit status: 0 once ctx ends
// (the caller ends it on SIGINT or SIGTERM), 1 if it cannot serve, 2 for a
// bad command line, after a message on stderr. -h prints Usage on stdout.
// The ready line, what is scheduled and the changes go to stdout (see
// Usage). When Main returns, the fake is closed and none of its goroutines
// runs.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "termsig fake: which fake? imds, gce, azure, alibaba or tencent\n\n%s", Usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, Usage)
		return exitOK
	}
	k, ok := kinds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "termsig fake: no fake %q: imds, gce, azure, alibaba or tencent\n\n%s", args[0], Usage)
		return exitUsage
	}
	listen, sc, err := k.parse(args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usageHead+"\n"+k.usage+"\n"+usageTail)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "termsig fake %s: %v\n\n%s", k.name, err, k.usage)
		return exitUsage
	}
	return k.serve(ctx, listen, sc, stdout, stderr)
}

// parse parses the fake's flags.
func (k kind) parse(args []string) (listen string, sc script, err error) {
	fs := flag.NewFlagSet("termsig fake "+k.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&listen, "listen", k.listen, "")
	check := k.flags(fs)
	if err := fs.Parse(args); err != nil {
		return "", nil, flagError(err)
	}
	if fs.NArg() > 0 {
		return "", nil, fmt.Errorf("takes no arguments, not %q", fs.Arg(0))
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return "", nil, fmt.Errorf("--listen %q: not a host:port, such as 127.0.0.1:%s", listen, port(k.listen))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	sc, err = check(set)
	return listen, sc, err
}

// The errors of package flag, which spells flags with one dash.
var (
	badValue   = regexp.MustCompile(`^invalid value (".*") for flag -([^:]+): (.*)$`)
	undefined  = regexp.MustCompile(`^flag provided but not defined: -(.*)$`)
	noArgument = regexp.MustCompile(`^flag needs an argument: -(.*)$`)
)

// flagError returns err of fs.Parse in the words of the usage: "--spot-in
// "-1s": must not be negative".
func flagError(err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, flag.ErrHelp):
		return err
	case badValue.MatchString(msg):
		return errors.New(badValue.ReplaceAllString(msg, "--$2 $1: $3"))
	case undefined.MatchString(msg):
		return errors.New(undefined.ReplaceAllString(msg, "no flag --$1"))
	case noArgument.MatchString(msg):
		return errors.New(noArgument.ReplaceAllString(msg, "--$1 needs a value"))
	}
	return err
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// serve serves sc on listen until ctx ends.
func (k kind) serve(ctx context.Context, listen string, sc script, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		hint := ""
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = "Is another fake or mock serving there? "
		}
		fmt.Fprintf(stderr, "termsig fake %s: %v\n%sChoose another address with --listen (--listen 127.0.0.1:0 takes any free port).\n", k.name, err, hint)
		return exitFailed
	}
	base := "http://" + reachable(ln.Addr())
	out := &printer{w: stdout}
	out.print(fmt.Sprintf("termsig fake %s: serving on %s; export %s=%s", k.name, base, k.env, k.envValue(base)))

	r := sc.start(time.Now())
	out.print(fmt.Sprintf("termsig fake %s: %s", k.name, r.plan))
	// The steps due at once are made before the first request is served,
	// so that a client's first look sees them: 0 means at once.
	steps := r.steps
	for len(steps) > 0 && !steps[0].at.After(time.Now()) {
		out.change(steps[0].do())
		steps = steps[1:]
	}

	hs := &http.Server{
		Handler: firstRequest(r.handler, out.change),
		// Reading a request is bounded, as in the fakes' own servers;
		// answering is not: GCE's long polls take up to a minute.
		ReadTimeout: 10 * time.Second,
		ErrorLog:    log.New(io.Discard, "", 0), // a client's broken request is not a change of the fake
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { play(sctx, steps, out.change) })
	if r.watch != nil {
		wg.Go(func() { r.watch(sctx, out.change) })
	}

	code := exitOK
	select {
	case <-ctx.Done():
	case err := <-served:
		fmt.Fprintf(stderr, "termsig fake %s: %v\n", k.name, err)
		code = exitFailed
	}
	stop()
	wg.Wait()
	// Shutdown stops listening and waits for the handlers, while the
	// fake's Close releases those that wait (long polls). A client that
	// holds a handler anyway, sending its request slowly, has its
	// connection closed after shutdownTimeout.
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if hs.Shutdown(dctx) != nil {
			_ = hs.Close()
		}
	}()
	r.close()
	<-shut
	return code
}

// reachable returns addr as a client dials it: an unspecified address
// (":1338" listens on every address, in both families, as Go listens) as
// 127.0.0.1.
func reachable(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
}

// play makes each step at its time, until ctx ends.
func play(ctx context.Context, steps []step, emit func(string)) {
	for _, s := range steps {
		t := time.NewTimer(time.Until(s.at))
		select {
		case <-t.C:
			emit(s.do())
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// sortSteps orders steps by time; steps of equal time keep their order.
func sortSteps(steps []step) []step {
	slices.SortStableFunc(steps, func(a, b step) int { return a.at.Compare(b.at) })
	return steps
}

// firstRequest calls emit about the first request that h gets, so that a
// user sees that the program tried reaches the fake.
func firstRequest(h http.Handler, emit func(string)) http.Handler {
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { emit(fmt.Sprintf("first request: %s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)) })
		h.ServeHTTP(w, r)
	})
}

// A printer writes whole lines to w, one at a time.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) print(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.w, line+"\n")
}

// change prints a change, after the time it was made; "" prints nothing.
func (p *printer) change(what string) {
	if what == "" {
		return
	}
	p.print(stamp(time.Now()) + " " + what)
}

// stamp is the time of a change line: UTC, to the millisecond.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// rfc3339 is how the plan and the changes give the times they announce.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// A duration is a flag's non-negative duration.
type duration struct{ d time.Duration }

func (d *duration) String() string { return d.d.String() }

func (d *duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration, such as 500ms, 10s or 2m")
	}
	if v < 0 {
		return errors.New("must not be negative (0 means at once)")
	}
	d.d = v
	return nil
}

// A choice is a flag that takes one of a few words, in any case, and holds
// it as the list spells it.
type choice struct {
	v     string
	words []string
}

func (c *choice) String() string { return c.v }

func (c *choice) Set(s string) error {
	for _, w := range c.words {
		if strings.EqualFold(s, w) {
			c.v = w
			return nil
		}
	}
	return fmt.Errorf("not one of %s", strings.Join(c.words, ", "))
}

// needs returns an error if a flag of set that only means something with
// event is given without it.
func needs(set map[string]bool, event string, flags ...string) error {
	if set[event] {
		return nil
	}
	for _, f := range flags {
		if set[f] {
			return fmt.Errorf("--%s without --%s: give --%s to schedule the event it belongs to", f, event, event)
		}
	}
	return nil
}

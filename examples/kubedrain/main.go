// Command kubedrain cordons and drains a Kubernetes node before the
// machine under it goes away. It runs as a DaemonSet pod on every node,
// watches the termination notices of its host with termsig (a spot
// interruption, a preemption, scheduled maintenance, a power-button
// press) and, on an imminent one, cordons and taints the node and evicts
// its pods with grace periods that end before the deadline, so that
// their controllers start them elsewhere while the machine still lives.
// A termination the platform holds for it (an Auto Scaling termination
// hook) is drained within the hold, and released once the pods are gone.
//
//	kubedrain --node NAME [--kubeconfig FILE] [--on-rebalance cordon] [--dry-run]
//
// See README.md for the flags, deploy/ for the manifests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/internal/buildinfo"
	"github.com/termsig/termsig/internal/ops"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/sources"
)

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

// options are the parsed flags.
type options struct {
	node          string
	kubeconfig    string
	sources       string
	margin        time.Duration
	fallback      time.Duration
	maxHold       time.Duration
	onRebalance   action
	onMaintenance action
	dryRun        bool
	logFormat     string
	logLevel      slog.Level
	imdsEvery     time.Duration
	imdsAdvice    time.Duration
	exempt        labels.Selector // --pod-selector-exempt: pods never evicted; nil selects none
	self          types.NamespacedName
	version       bool // --version: print the version line and exit
	// ops are --metrics-bind-address, --health-probe-bind-address and the
	// --webhook-* flags.
	ops ops.Config
}

const usageLine = "usage: kubedrain [--node NAME] [--kubeconfig FILE] [--sources S,...] [--on-rebalance A] [--on-maintenance A] [--margin D] [--pod-selector-exempt SELECTOR] [--dry-run] [flags]"

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("kubedrain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{self: types.NamespacedName{Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME")}}
	var onRebalance, onMaintenance, level, exempt string
	fs.StringVar(&o.node, "node", os.Getenv("NODE_NAME"), "the node to drain (default $NODE_NAME, from the downward API)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (empty: the pod's service account, or $KUBECONFIG / ~/.kube/config outside a cluster)")
	fs.StringVar(&o.sources, "sources", "auto", `notice sources: "auto" (detected on this host) or a comma-separated list of `+
		strings.Join(slices.DeleteFunc(sources.Names(), func(n string) bool { return n == "signal" }), ", "))
	fs.DurationVar(&o.margin, "margin", 10*time.Second, "time kept before a notice's deadline: grace periods end and evictions stop this much earlier")
	fs.DurationVar(&o.fallback, "fallback", 2*time.Minute, "how long evictions are tried for a notice without a deadline")
	fs.DurationVar(&o.maxHold, "max-hold", time.Hour, "the longest a held termination (an Auto Scaling termination hook) is used for the drain, from its first notice: grace periods and evictions end by then, and the hold is released")
	fs.StringVar(&onRebalance, "on-rebalance", "cordon", "what a rebalance recommendation does: ignore, cordon or drain")
	fs.StringVar(&onMaintenance, "on-maintenance", "cordon", "what scheduled maintenance does: ignore, cordon or drain")
	fs.StringVar(&exempt, "pod-selector-exempt", "", `label selector of pods that are never evicted nor waited for, such as "app=cache" or "tier in (edge),!canary" (empty: none)`)
	fs.BoolVar(&o.dryRun, "dry-run", false, "log what would be done; change nothing")
	fs.StringVar(&o.logFormat, "log-format", "json", "log format on stderr: json or text")
	fs.StringVar(&level, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&o.imdsEvery, "imds-interval", 0, "IMDS polling interval for spot interruptions (0: the imds default, 1s)")
	fs.DurationVar(&o.imdsAdvice, "imds-advisory-interval", 0, "IMDS polling interval for rebalance recommendations (0: the imds default, 3s)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	(&o.ops).RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if o.onRebalance, err = parseAction(onRebalance); err != nil {
		return nil, fmt.Errorf("--on-rebalance: %w", err)
	}
	if o.onMaintenance, err = parseAction(onMaintenance); err != nil {
		return nil, fmt.Errorf("--on-maintenance: %w", err)
	}
	if err := o.logLevel.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	if o.exempt, err = parseExempt(exempt); err != nil {
		return nil, fmt.Errorf("--pod-selector-exempt: %w", err)
	}
	switch {
	case o.node == "":
		return nil, errors.New("no node: set --node or NODE_NAME")
	case o.logFormat != "json" && o.logFormat != "text":
		return nil, fmt.Errorf("--log-format must be json or text, not %q", o.logFormat)
	case o.margin < 0 || o.fallback <= 0 || o.maxHold <= 0 || o.imdsEvery < 0 || o.imdsAdvice < 0:
		return nil, errors.New("--margin and the intervals must not be negative, --fallback and --max-hold must be positive")
	}
	return o, nil
}

// parseExempt parses the selector of --pod-selector-exempt, in the syntax
// of kubectl's --selector. Empty (or blank) selects no pod, and gives nil:
// labels.Parse would make it a selector of every pod.
func parseExempt(s string) (labels.Selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	return labels.Parse(s)
}

func realMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "kubedrain: %v\n%s\n", err, usageLine)
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, buildinfo.Line("kubedrain"))
		return 0
	}
	log := newLogger(stderr, o.logFormat, o.logLevel).With("node", o.node)
	// client-go logs through klog: the same handler keeps stderr one
	// format.
	klog.SetSlogLogger(log)
	o.ops.Name, o.ops.Logger = "kubedrain", log
	o.ops.Webhook.Fields = map[string]string{"node": o.node}
	srv, err := ops.Start(o.ops)
	if err != nil {
		fmt.Fprintf(stderr, "kubedrain: %v\n%s\n", err, usageLine)
		return 2
	}
	// Closed after run, which waits for the drain under way: the
	// outcomes it posts are sent.
	defer srv.Close()
	// kubedrain's own SIGTERM (its pod deleted, a rolling update) ends
	// kubedrain, not the node: the signals are not a notice source here,
	// and the next kubedrain pod takes over from the node's record.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log, srv); err != nil {
		log.Error("kubedrain: " + err.Error())
		return 1
	}
	return 0
}

func run(ctx context.Context, o *options, log *slog.Logger, srv *ops.Server) error {
	client, err := newClient(o.kubeconfig)
	if err != nil {
		return err
	}
	srcs, err := o.pickSources(log)
	if err != nil {
		return err
	}
	// The sources start before the API server is asked anything: a notice
	// that comes while it is slow to answer waits on the Notifier's
	// channel, not for the API server.
	n := termsig.Config{Logger: log}.New(srcs...)
	defer n.Stop()
	srv.Watch(n)
	c := newController(o, client, log)
	c.srv = srv
	c.kube.m = newMetrics(srv.Registerer())
	srv.AddReadyCheck("node", c.kube.read.check)
	var reading sync.WaitGroup
	defer reading.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := checkNode(ctx, c.kube, log); err != nil {
		return err
	}
	if !c.kube.read.done() {
		// The API server did not answer: read the node again in the
		// background, for /readyz.
		reading.Go(func() { c.kube.readUntilDone(ctx, time.Second, 30*time.Second, log) })
	}
	c.healthy = healthyIn(n)
	c.release = n.Release
	names := make([]string, len(srcs))
	for i, s := range srcs {
		names[i] = s.Name()
	}
	log.Info("kubedrain: watching", "sources", strings.Join(names, ","),
		"on-rebalance", o.onRebalance.String(), "on-maintenance", o.onMaintenance.String(), "dry-run", o.dryRun)
	c.run(ctx, n.C(), n.Ready())
	return nil
}

func newController(o *options, client kubernetes.Interface, log *slog.Logger) *controller {
	instance := o.self.Name
	if instance == "" {
		instance, _ = os.Hostname()
	}
	k := &kube{client: client, node: o.node, instance: instance, dryRun: o.dryRun, log: log}
	return &controller{
		kube: k,
		evictor: &evictor{kube: k, self: o.self, exempt: o.exempt, margin: o.margin,
			backoff: 250 * time.Millisecond, maxBackoff: 5 * time.Second, goneEvery: time.Second, now: time.Now},
		onRebalance:   o.onRebalance,
		onMaintenance: o.onMaintenance,
		fallback:      o.fallback,
		maxHold:       o.maxHold,
		minDrain:      15 * time.Second,
		writeTimeout:  10 * time.Second,
		cordonWait:    2 * time.Second,
		retry:         250 * time.Millisecond,
		log:           log,
		now:           time.Now,
		warned:        map[string]bool{},
		ends:          map[string]time.Time{},
		holds:         map[string]*hold{},
	}
}

// newClient returns a client for the cluster: from the kubeconfig file
// if one is named, else in-cluster (the pod's service account), else
// from $KUBECONFIG or ~/.kube/config.
func newClient(kubeconfig string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	switch {
	case kubeconfig != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	default:
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.UserAgent = "termsig-kubedrain"
	// client-go sends everything over one HTTP/2 connection and finds
	// out that it died silently only by its health check, after 30 s
	// without a frame and a 15 s ping: most of a spot interruption's two
	// minutes. 5 s and 5 s, unless the environment says otherwise.
	for _, v := range []string{"HTTP2_READ_IDLE_TIMEOUT_SECONDS", "HTTP2_PING_TIMEOUT_SECONDS"} {
		if _, ok := os.LookupEnv(v); !ok {
			os.Setenv(v, "5")
		}
	}
	// client-go's default of 5 requests a second would spread the
	// evictions of a full node over half a minute; the API server's
	// priority and fairness protects it instead.
	cfg.QPS, cfg.Burst = 50, 200
	return kubernetes.NewForConfig(cfg)
}

// checkNode makes sure at start that the node exists and that kubedrain
// may read it, so that a wrong name or missing permissions show at once
// rather than when the machine is going away. An API server that cannot
// be reached now is logged, and kubedrain goes on: its writes are retried.
func checkNode(ctx context.Context, k *kube, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := k.client.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{})
	k.read.got(err)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return fmt.Errorf("node %s: %w", k.node, err)
	case err != nil && !errors.Is(err, context.Canceled):
		log.Warn("kubedrain: the API server does not answer; going on", "err", err)
	}
	return nil
}

// pickSources returns the notice sources: those detected on this host,
// or those named by --sources, never the signal source (see realMain).
func (o *options) pickSources(log *slog.Logger) ([]termsig.Source, error) {
	cfg := sources.Config{
		Logger:       log,
		PlatformOnly: true,
		IMDS:         imds.Config{Interval: o.imdsEvery, AdvisoryInterval: o.imdsAdvice},
		// kubedrain does not hold the host's shutdown for its drain: the
		// kubelet's graceful node shutdown has its own delay lock, and
		// how long the host waits is the operator's to set there
		// (shutdownGracePeriod), not a second lock's (see README.md).
		Logind: logind.Config{NoLock: true},
	}
	var srcs []termsig.Source
	if o.sources == "auto" {
		srcs = sources.Detect(cfg)
	} else {
		var err error
		if srcs, err = sources.ByName(cfg, strings.Split(o.sources, ",")...); err != nil {
			return nil, fmt.Errorf("--sources: %w", err)
		}
	}
	for _, s := range srcs {
		// A source that can never work (a bad endpoint, an interval
		// below the floor) would leave kubedrain looking healthy and
		// deaf: that is fatal. So is one named by --sources that does
		// not apply here.
		if d, ok := s.(termsig.Detector); ok {
			if err := d.Available(); err != nil && (o.sources != "auto" || !errors.Is(err, termsig.ErrUnavailable)) {
				return nil, fmt.Errorf("source %s: %w", s.Name(), err)
			}
		}
	}
	if len(srcs) == 0 {
		log.Warn("kubedrain: no platform notice source applies on this host; kubedrain will never drain the node")
	}
	return srcs, nil
}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

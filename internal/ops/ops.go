package ops

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/webhook"
)

// DefaultStaleness is how long the main loop may go without a Tick when
// Config.Staleness is not set: three of kubelet's default probe periods.
const DefaultStaleness = 30 * time.Second

// Config says where a Server listens. Its zero value serves nothing: a
// Server that only counts.
type Config struct {
	// Name is the program's name, the prefix of the Server's log messages
	// ("termsig", "kubedrain"). Empty: no prefix.
	Name string
	// MetricsAddr is the "host:port" that serves /metrics
	// (--metrics-bind-address). Empty: metrics are not served, and the Go
	// and process collectors are not registered.
	MetricsAddr string
	// ProbeAddr is the "host:port" that serves /healthz and /readyz
	// (--health-probe-bind-address). Empty: not served. Equal to
	// MetricsAddr: one listener serves the three paths.
	ProbeAddr string
	// Staleness is how long the main loop may go without a Tick before
	// /healthz fails. Zero: DefaultStaleness.
	Staleness time.Duration
	// Logger gets one line per listener, with its address, and the
	// servers' errors. Nil: discard.
	Logger *slog.Logger
	// Now is the clock of /healthz and Acted. Nil: time.Now.
	Now func() time.Time
	// Webhook, if its URL is set, gets each imminent notice the program
	// takes (Noticed) and its outcomes (Outcome).
	Webhook WebhookConfig
}

// RegisterFlags defines --metrics-bind-address and
// --health-probe-bind-address on fs, stored in c.MetricsAddr and
// c.ProbeAddr.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.MetricsAddr, "metrics-bind-address", "", `serve Prometheus metrics at http://ADDR/metrics (host:port, ":9090" on every interface, port 0 any free one); empty: off`)
	fs.StringVar(&c.ProbeAddr, "health-probe-bind-address", "", "serve /healthz (the main loop turns) and /readyz (the sources had their first look) at ADDR; empty: off; the same ADDR as --metrics-bind-address: one listener")
	c.Webhook.registerFlags(fs)
}

// A Server serves the metrics and probes of one program, and keeps its
// metrics. Create one with Start; its methods are safe for concurrent use,
// and a nil *Server does nothing.
type Server struct {
	log   *slog.Logger
	now   func() time.Time
	stale time.Duration
	reg   *prometheus.Registry

	notices *prometheus.CounterVec
	action  prometheus.Histogram
	events  eventLabels

	notifier atomic.Pointer[termsig.Notifier]
	lastTick atomic.Int64 // Unix nanoseconds of the last Tick
	beat     *time.Ticker // nil without probes

	checksMu sync.Mutex
	checks   []readyCheck

	hook       *webhook.Sender // nil without a webhook
	hookName   string
	hookAdvice bool
	hookFields map[string]string
	hookMu     sync.Mutex
	hookSeen   map[[2]string]bool // (source, event) -> held, of the imminent notices posted

	metricsAddr, probeAddr string // as bound
	servers                []*http.Server
	wg                     sync.WaitGroup
	closeOnce              sync.Once
}

// Start listens on the addresses of cfg, before it returns, so that an
// address in use or one that is not local is its error (naming the flag),
// not a log line later; then it serves them until Close. On error nothing
// is left listening.
func Start(cfg Config) (*Server, error) {
	s := newServer(cfg)
	if err := s.startWebhook(cfg.Name, cfg.Webhook); err != nil {
		if s.beat != nil {
			s.beat.Stop()
		}
		return nil, err
	}
	addrs, muxes := s.routes(cfg)
	lns := make([]net.Listener, 0, len(addrs))
	for _, addr := range addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			if s.beat != nil {
				s.beat.Stop()
			}
			s.closeWebhook()
			flagName := "--health-probe-bind-address"
			if addr == cfg.MetricsAddr {
				flagName = "--metrics-bind-address"
			}
			return nil, fmt.Errorf("%s %s: %w", flagName, addr, err)
		}
		lns = append(lns, ln)
	}
	prefix := ""
	if cfg.Name != "" {
		prefix = cfg.Name + ": "
	}
	for i, addr := range addrs {
		ln := lns[i]
		bound := ln.Addr().String()
		var what []string
		if addr == cfg.MetricsAddr {
			s.metricsAddr = bound
			what = append(what, "metrics")
		}
		if addr == cfg.ProbeAddr {
			s.probeAddr = bound
			what = append(what, "health probes")
		}
		srv := &http.Server{
			Handler:           muxes[addr],
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		}
		s.servers = append(s.servers, srv)
		s.wg.Go(func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				s.log.Error(prefix+"serving "+strings.Join(what, " and ")+" stopped", "addr", bound, "err", err)
			}
		})
		s.log.Info(prefix+"serving "+strings.Join(what, " and "), "addr", bound)
	}
	return s, nil
}

// newServer returns a Server with its metrics, serving nothing yet.
func newServer(cfg Config) *Server {
	s := &Server{log: cfg.Logger, now: cfg.Now, stale: cfg.Staleness, reg: prometheus.NewRegistry()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.stale <= 0 {
		s.stale = DefaultStaleness
	}
	s.lastTick.Store(s.now().UnixNano())
	s.notices = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "termsig_notices_total",
		Help: "Notices taken from the Notifier, by source, kind and event (at most " + fmt.Sprint(MaxEventsPerSource) + ` events per source, then "other").`,
	}, []string{"source", "kind", "event"})
	s.action = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "termsig_notice_action_seconds",
		Help:    "Time from a notice's Observed to the program's first action on it.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
	s.reg.MustRegister(s.notices, s.action, sourceCollector{s})
	if cfg.MetricsAddr != "" {
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return s
}

// routes returns the addresses to listen on, in flag order, and the
// handler of each: one per distinct address.
func (s *Server) routes(cfg Config) (addrs []string, muxes map[string]*http.ServeMux) {
	muxes = map[string]*http.ServeMux{}
	mux := func(addr string) *http.ServeMux {
		if muxes[addr] == nil {
			addrs = append(addrs, addr)
			muxes[addr] = http.NewServeMux()
		}
		return muxes[addr]
	}
	if cfg.MetricsAddr != "" {
		errLog := slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
		h := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
			ErrorLog:            errLog,
			ErrorHandling:       promhttp.ContinueOnError, // a failing collector does not hide the others
			Registry:            s.reg,
			MaxRequestsInFlight: 4,
		})
		mux(cfg.MetricsAddr).Handle("/metrics", promhttp.InstrumentMetricHandler(s.reg, h))
	}
	if cfg.ProbeAddr != "" {
		m := mux(cfg.ProbeAddr)
		m.HandleFunc("/healthz", s.healthz)
		m.HandleFunc("/readyz", s.readyz)
		s.beat = time.NewTicker(s.stale / 3)
	}
	return addrs, muxes
}

// shutdownTimeout bounds how long Close waits for a scrape or a probe
// under way.
const shutdownTimeout = time.Second

// Close stops the listeners and waits, at most a second, for the requests
// under way; when it returns no goroutine of the Server runs. It may be
// called more than once.
func (s *Server) Close() {
	if s == nil {
		return
	}
	s.closeOnce.Do(func() {
		s.closeWebhook()
		if s.beat != nil {
			s.beat.Stop()
		}
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		for _, srv := range s.servers {
			if srv.Shutdown(ctx) != nil {
				_ = srv.Close()
			}
		}
		s.wg.Wait()
	})
}

// MetricsAddr is the address that serves /metrics, as bound (the port
// chosen for port 0), or "" when metrics are not served.
func (s *Server) MetricsAddr() string {
	if s == nil {
		return ""
	}
	return s.metricsAddr
}

// ProbeAddr is the address that serves /healthz and /readyz, as bound, or
// "" when they are not served.
func (s *Server) ProbeAddr() string {
	if s == nil {
		return ""
	}
	return s.probeAddr
}

// Registerer is where the program registers its own metrics, named after
// it (termsig_supervise_signals_sent_total, kubedrain_evictions_total).
// Nil for a nil Server: registering there is for the program to skip.
func (s *Server) Registerer() prometheus.Registerer {
	if s == nil {
		return nil
	}
	return s.reg
}

// Watch makes the Server report on n: the state of its sources in the
// metrics, and its readiness in /readyz, which fails until Watch is
// called. A later call replaces n.
func (s *Server) Watch(n *termsig.Notifier) {
	if s == nil {
		return
	}
	s.notifier.Store(n)
}

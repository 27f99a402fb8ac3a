// Command registry serves the stand-in CI service of package registry on
// loopback, keeping its state in a JSON file.
//
//	go run ./examples/registry/cmd/registry -listen 127.0.0.1:8321 -state /tmp/registry.json
//
// Its first line on standard output is "registry: listening on URL", with
// the real port when -listen asks for port 0. It logs every request and every
// change of state to standard error. SIGTERM or SIGINT stops it: it finishes
// the requests in flight (for up to 5 s) and exits with status 0, so that
// systemd records a requested stop as clean.
//
// Enqueueing jobs, reading them and removing other runners take the admin
// token, read from -admin-token-file (by default the state file's path plus
// ".admin-token"); registering a runner takes the join token (or the admin
// token), read from -join-token-file (by default the state file's path plus
// ".join-token"). Either file is created with a new random token if it does
// not exist. The tokens themselves are never printed.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/termsig/termsig/examples/registry"
	"github.com/termsig/termsig/internal/buildinfo"
)

// options are the command line's settings.
type options struct {
	listen, statePath, adminTokenFile, joinTokenFile string
	cfg                                              registry.Config
}

func main() {
	var o options
	flag.StringVar(&o.listen, "listen", "127.0.0.1:8321", "`address` to listen on; port 0 picks a free port")
	flag.StringVar(&o.statePath, "state", "registry.json", "state `file`, created if missing; its directory must exist")
	flag.StringVar(&o.adminTokenFile, "admin-token-file", "", "`file` holding the admin token, created with a new random token if missing (default: the state file's path plus \".admin-token\")")
	flag.StringVar(&o.joinTokenFile, "join-token-file", "", "`file` holding the join token, which registering a runner takes, created with a new random token if missing (default: the state file's path plus \".join-token\")")
	flag.DurationVar(&o.cfg.Lease, "lease", registry.DefaultLease, "how long a runner stays registered without a request from it; then it is removed and its job re-queued")
	flag.IntVar(&o.cfg.MaxJobs, "max-jobs", registry.DefaultMaxJobs, "most jobs held; beyond, the oldest finished job is forgotten, or 429 if none is finished")
	flag.IntVar(&o.cfg.MaxRunners, "max-runners", registry.DefaultMaxRunners, "most runners registered; beyond, 429")
	flag.IntVar(&o.cfg.MaxCommand, "max-command", registry.DefaultMaxCommand, "longest command line, in bytes; beyond, 413")
	flag.IntVar(&o.cfg.MaxOutput, "max-output", registry.DefaultMaxOutput, "longest output sent with a result, in bytes; beyond, 413")
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Println(buildinfo.Line("registry"))
		return
	}
	if o.adminTokenFile == "" {
		o.adminTokenFile = o.statePath + ".admin-token"
	}
	if o.joinTokenFile == "" {
		o.joinTokenFile = o.statePath + ".join-token"
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, o); err != nil {
		log.Error("registry failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, o options) error {
	// Before anything that can block, so that a signal during start-up is
	// not lost to the default action.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	admin, adminCreated, err := tokenFile(o.adminTokenFile, "admin")
	if err != nil {
		return err
	}
	join, joinCreated, err := tokenFile(o.joinTokenFile, "join")
	if err != nil {
		return err
	}
	o.cfg.AdminToken, o.cfg.JoinToken = admin, join
	srv, err := registry.NewServer(o.statePath, &o.cfg)
	if err != nil {
		return err
	}
	srv.Logger = log
	if adminCreated {
		log.Info("admin token created", "file", o.adminTokenFile)
	}
	if joinCreated {
		log.Info("join token created", "file", o.joinTokenFile)
	}

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	// Printed after Listen, so that whoever reads it can connect at once.
	fmt.Printf("registry: listening on http://%s\n", ln.Addr())
	log.Info("registry started", "addr", ln.Addr().String(), "state", o.statePath, "admin_token_file", o.adminTokenFile, "join_token_file", o.joinTokenFile, "lease", o.cfg.Lease)

	hs := &http.Server{Handler: logRequests(log, srv), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	select {
	case err := <-served:
		return err // never http.ErrServerClosed: only Shutdown returns that
	case <-ctx.Done():
	}
	log.Info("shutting down", "cause", context.Cause(ctx))
	stop() // a second signal now gets the default action: exit at once

	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		// Every change is on disk before it is answered, so cutting the
		// last requests short loses nothing: still a clean stop.
		log.Warn("requests still running at the shutdown timeout; closing them", "err", err)
		hs.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// tokenFile reads the token (the admin or the join token, as what says)
// from path, or if there is no such file creates it, readable by its owner
// only, with a new random token.
func tokenFile(path, what string) (token string, created bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		token = rand.Text()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", false, fmt.Errorf("creating the %s token file: %w", what, err)
		}
		_, err = f.WriteString(token + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return token, err == nil, err
	}
	if err != nil {
		return "", false, fmt.Errorf("reading the %s token file: %w", what, err)
	}
	if token = strings.TrimSpace(string(b)); token == "" {
		return "", false, fmt.Errorf("the %s token file %s is empty", what, path)
	}
	return token, false, nil
}

// logRequests logs one line per request, after it is answered.
func logRequests(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		log.Info("request", "method", r.Method, "path", r.URL.RequestURI(), "status", rec.status, "duration", time.Since(start).Round(time.Microsecond))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

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
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/termsig/termsig/examples/registry"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8321", "`address` to listen on; port 0 picks a free port")
	statePath := flag.String("state", "registry.json", "state `file`, created if missing; its directory must exist")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, *listen, *statePath); err != nil {
		log.Error("registry failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, listen, statePath string) error {
	// Before anything that can block, so that a signal during start-up is
	// not lost to the default action.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	srv, err := registry.NewServer(statePath)
	if err != nil {
		return err
	}
	srv.Logger = log

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	// Printed after Listen, so that whoever reads it can connect at once.
	fmt.Printf("registry: listening on http://%s\n", ln.Addr())
	log.Info("registry started", "addr", ln.Addr().String(), "state", statePath)

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

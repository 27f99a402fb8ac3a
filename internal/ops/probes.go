package ops

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Tick records a turn of the program's main loop, which /healthz watches:
// call it at the top of each turn, before the select.
func (s *Server) Tick() {
	if s == nil {
		return
	}
	s.lastTick.Store(s.now().UnixNano())
}

// Heartbeat returns a channel that receives every third of
// Config.Staleness while health probes are served, for the main loop to
// select on so that it turns (and Ticks) when nothing else happens. It is
// nil (never ready) when probes are off, so that an idle program does not
// wake for nobody, and stops receiving once the Server is closed.
func (s *Server) Heartbeat() <-chan time.Time {
	if s == nil || s.beat == nil {
		return nil
	}
	return s.beat.C
}

// A readyCheck is a named condition of /readyz.
type readyCheck struct {
	name  string
	check func() error
}

// AddReadyCheck makes /readyz also ask check, named name in its body: it
// fails while check returns an error (kubedrain: its first node read has
// not worked yet). check runs on each probe, so it must be quick and safe
// for concurrent use. A name used twice, or the Notifier's own "notifier",
// is a panic.
func (s *Server) AddReadyCheck(name string, check func() error) {
	if s == nil {
		return
	}
	s.checksMu.Lock()
	defer s.checksMu.Unlock()
	for _, c := range s.checks {
		if c.name == name {
			panic("termsig: ops: AddReadyCheck: a second check named " + name)
		}
	}
	if name == "" || name == notifierCheck || check == nil {
		panic(fmt.Sprintf("termsig: ops: AddReadyCheck: a check and a name other than %q and %q are needed", "", notifierCheck))
	}
	s.checks = append(s.checks, readyCheck{name, check})
}

// notifierCheck names the Notifier's readiness in /readyz.
const notifierCheck = "notifier"

// errNotReady and errNoNotifier are the notifier check's failures.
var (
	errNotReady   = errors.New("not every source has had its first look")
	errNoNotifier = errors.New("not started yet")
)

// healthz answers 200 while the main loop's last Tick is at most
// Staleness old, else 500 with when it was.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	now := s.now()
	last := time.Unix(0, s.lastTick.Load())
	age := now.Sub(last)
	var err error
	if age > s.stale {
		err = fmt.Errorf("the main loop has not turned since %s (%v ago, more than %v)",
			last.UTC().Format(time.RFC3339Nano), age.Round(time.Millisecond), s.stale)
	}
	writeChecks(w, "healthz", http.StatusInternalServerError, []result{{"loop", err}})
}

// readyz answers 200 when the Notifier is Ready and every check passes,
// else 503.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	res := []result{{name: notifierCheck}}
	switch n := s.notifier.Load(); {
	case n == nil:
		res[0].err = errNoNotifier
	default:
		select {
		case <-n.Ready():
		default:
			res[0].err = errNotReady
		}
	}
	s.checksMu.Lock()
	checks := append([]readyCheck(nil), s.checks...)
	s.checksMu.Unlock()
	for _, c := range checks {
		res = append(res, result{c.name, c.check()})
	}
	writeChecks(w, "readyz", http.StatusServiceUnavailable, res)
}

type result struct {
	name string
	err  error
}

// writeChecks writes one line per check and a verdict, in the form of
// Kubernetes' verbose probes; failed is the status when a check failed.
func writeChecks(w http.ResponseWriter, probe string, failed int, res []result) {
	var b strings.Builder
	code := http.StatusOK
	for _, r := range res {
		if r.err != nil {
			code = failed
			fmt.Fprintf(&b, "[-]%s failed: %s\n", r.name, oneLine(r.err.Error()))
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", r.name)
		}
	}
	if code == http.StatusOK {
		fmt.Fprintf(&b, "%s check passed\n", probe)
	} else {
		fmt.Fprintf(&b, "%s check failed\n", probe)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(b.String()))
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

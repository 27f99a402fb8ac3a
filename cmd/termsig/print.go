//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/ops"
)

// printNotices writes each notice to w, as one JSON line or as text, until
// the first imminent one (see options.ends). srv counts the notices and
// watches the loop; nil: nothing does.
func printNotices(o *options, srcs []termsig.Source, w io.Writer, log *slog.Logger, srv *ops.Server) int {
	n := newNotifier(srcs, log, srv)
	defer n.Stop()
	ready := n.Ready()
	for {
		srv.Tick()
		var nt termsig.Notice
		select {
		case <-srv.Heartbeat():
			continue
		case <-ready:
			if nothingRuns(n, log) {
				return exitFailed
			}
			ready = nil
			continue
		case nt = <-n.C():
		}
		srv.Noticed(nt)
		if !o.wants(nt) {
			log.Debug("termsig: notice filtered out by --kinds", "notice", nt)
			continue
		}
		if err := printOne(w, o.format, nt); err != nil {
			log.Error("termsig: cannot write the notice", "err", err)
			return exitFailed
		}
		srv.Acted(nt)
		if o.ends(nt) {
			return exitOK
		}
	}
}

func printOne(w io.Writer, format string, nt termsig.Notice) error {
	if format == "text" {
		_, err := fmt.Fprintln(w, nt)
		return err
	}
	b, err := json.Marshal(nt)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/termsig/termsig"
)

// printNotices writes each notice to w, as one JSON line or as text, until
// the first imminent one (see options.ends).
func printNotices(o *options, srcs []termsig.Source, w io.Writer, log *slog.Logger) int {
	n := newNotifier(srcs, log)
	defer n.Stop()
	ready := n.Ready()
	for {
		var nt termsig.Notice
		select {
		case <-ready:
			if nothingRuns(n, log) {
				return exitFailed
			}
			ready = nil
			continue
		case nt = <-n.C():
		}
		if !o.wants(nt) {
			log.Debug("termsig: notice filtered out by --kinds", "notice", nt)
			continue
		}
		if err := printOne(w, o.format, nt); err != nil {
			log.Error("termsig: cannot write the notice", "err", err)
			return exitFailed
		}
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

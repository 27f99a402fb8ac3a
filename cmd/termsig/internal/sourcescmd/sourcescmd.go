// Package sourcescmd is "termsig sources": which notice sources apply on
// this host, why each other one does not, and how the first look of each
// that applies goes.
package sourcescmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
	"github.com/termsig/termsig/sources"
)

// Exit statuses of Main.
const (
	exitApplies     = 0 // at least one platform source applies
	exitNone        = 1 // none does
	exitUsage       = 2
	exitInterrupted = 130 // ctx ended (SIGINT, SIGTERM) before --timeout
)

// defaultTimeout bounds the first looks when --timeout is not given: long
// enough for a metadata service that answers slowly (they answer in
// milliseconds; gcemeta gives up on a request after 5 s), short enough
// not to keep a user waiting.
const defaultTimeout = 5 * time.Second

// Usage is the usage of "termsig sources", for "termsig sources -h" and
// "termsig -h".
const Usage = `usage: termsig sources [--timeout D] [--json] [--sources S,...] [--root DIR] [--acpid-socket PATH]

Says which notice sources apply on this host and, for each that does not,
why (the firmware's strings, the socket that is missing); then has a first
look with each that applies (a signal handler installed, a first answer
from a metadata service, logind's delay lock taken and released) and says
whether it answered, failed (with the error) or was still waiting at
--timeout, and how long it took. The environment variables that point
sources elsewhere are honoured: AWS_EC2_METADATA_SERVICE_ENDPOINT,
AWS_EC2_METADATA_DISABLED, GCE_METADATA_HOST, AZURE_METADATA_ENDPOINT,
ALIBABA_METADATA_ENDPOINT, TENCENT_METADATA_ENDPOINT,
DBUS_SYSTEM_BUS_ADDRESS.

flags:
  --timeout D          bound on the first looks (default 5s)
  --json               one JSON object per source, for scripts
  --sources S,...      only these sources: signal, imds, asg, gcemeta, azure,
                       alibaba, tencent, acpi, logind
  --root DIR           read the host's files (DMI, sockets) below DIR, such as
                       the host's root mounted in a container; DIR must be
                       a directory
  --acpid-socket PATH  acpid's socket (default: /var/run/acpid.socket, if there)

Exit status: 0 if at least one platform source (one that is not signal)
applies, 1 if none does, 2 on a usage error, 130 if SIGINT or SIGTERM
ended the first looks before --timeout (what was found by then is shown).
A source whose configuration is wrong (an endpoint that is not a URL, an
--acpid-socket that is not there) does not apply: its first look fails at
once with the mistake, as termsig print, hook and supervise refuse to
start with it. Nor does one that finds at its first look that it does not
apply (logind with no systemd-logind on the bus). One whose first look
failed but that goes on retrying (a metadata service that answers 500 or
cannot be reached) applies, and so does one still waiting at --timeout.
`

// usageLine is the first line of Usage, for usage errors.
var usageLine, _, _ = strings.Cut(Usage, "\n")

// Main runs "termsig sources" with args, the arguments after "sources",
// and returns the exit status. ctx bounds the first looks as --timeout
// does: the caller ends it on SIGINT and SIGTERM, and Main then shows what
// was found and returns 130.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("termsig sources", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	timeout := fs.Duration("timeout", defaultTimeout, "")
	asJSON := fs.Bool("json", false, "")
	only := fs.String("sources", "", "")
	root := fs.String("root", "", "")
	acpidSocket := fs.String("acpid-socket", "", "")
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "termsig sources: %v\n%s\n", err, usageLine)
		return exitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, Usage)
			return exitApplies
		}
		return usageErr(err)
	}
	if fs.NArg() > 0 {
		return usageErr(fmt.Errorf("takes no arguments, not %q", fs.Arg(0)))
	}
	if *timeout <= 0 {
		return usageErr(fmt.Errorf("--timeout must be positive, not %v", *timeout))
	}
	if err := checkRoot(*root); err != nil {
		return usageErr(err)
	}

	cfg := sources.Config{
		// The sources' own lines (which transports acpi watches) would
		// repeat the table; what goes wrong still shows.
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Root:   *root,
		ACPI:   acpi.Config{AcpidSocket: *acpidSocket},
	}
	var names []string // nil: every source
	if isSet(fs, "sources") {
		// As the watching commands read it: an empty name, such as
		// --sources '', is unknown, and a repeated one an error.
		named, err := sources.ByName(cfg, strings.Split(*only, ",")...)
		if err != nil {
			return usageErr(fmt.Errorf("--sources: %w", err))
		}
		for _, s := range named {
			names = append(names, s.Name())
		}
	}
	var rows []row
	var look []termsig.Source
	for _, c := range sources.Explain(cfg) {
		if names != nil && !slices.Contains(names, c.Source.Name()) {
			continue
		}
		rows = append(rows, row{choice: c})
		if c.Chosen {
			look = append(look, c.Source)
		}
	}
	timedOut := errors.New("--timeout")
	lctx, cancel := context.WithTimeoutCause(ctx, *timeout, timedOut)
	looks := sources.FirstLook(lctx, look...)
	// ctx ended first if it is lctx's cause.
	interrupted := lctx.Err() != nil && !errors.Is(context.Cause(lctx), timedOut)
	cancel()
	for i := range rows {
		if rows[i].choice.Chosen {
			rows[i].look, looks = &looks[0], looks[1:]
		}
	}

	status := exitNone
	for _, r := range rows {
		if r.applies() && !r.local() {
			status = exitApplies
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r.json()); err != nil {
				fmt.Fprintln(stderr, "termsig sources:", err)
				return exitNone
			}
		}
	} else {
		writeTable(stdout, rows, interrupted)
	}
	if interrupted {
		// The cause names the signal (os/signal.NotifyContext).
		fmt.Fprintf(stderr, "termsig sources: interrupted: %v\n", context.Cause(ctx))
		return exitInterrupted
	}
	return status
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// checkRoot returns a usage error unless root, the value of --root, is
// empty (this machine) or a directory: a mistyped path would otherwise be
// read as a host without firmware strings or sockets.
func checkRoot(root string) error {
	if root == "" {
		return nil
	}
	fi, err := os.Stat(root)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // its path is root, which the message names
		}
		return fmt.Errorf("--root %s: %w", root, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("--root %s: not a directory", root)
	}
	return nil
}

// A row is what is known of one source.
type row struct {
	choice sources.Choice
	look   *sources.Look // nil when not chosen
}

// applies reports whether the source applies: Detect chooses it, its
// Config can work, and it is still running after its first look, whether
// it answered, retries after an error, or is still waiting. A first look
// that found that the source does not apply here (StateUnavailable), or
// failed with a mistake of the Config (StateFailed), or whose Watch
// returned at once ends it: such a source would watch nothing, and the
// watching commands refuse to start with a misconfigured one.
func (r row) applies() bool {
	return r.choice.Chosen && r.choice.Err == nil && r.look.State == termsig.StateRunning
}

// local reports whether the source's notices concern only this process.
func (r row) local() bool {
	d, ok := r.choice.Source.(termsig.Describer)
	return ok && d.Traits().Local
}

// The outcomes of a first look, as --json spells them.
const (
	outcomeReady       = "ready"       // it answered
	outcomeFailed      = "failed"      // with an error
	outcomeUnavailable = "unavailable" // it found that it does not apply
	outcomeTimeout     = "timeout"     // still waiting when the time was up
)

// outcome says how the first look went, and its error.
func (r row) outcome() (string, error) {
	l := r.look
	switch {
	case !l.Ready:
		return outcomeTimeout, l.Err
	case l.State == termsig.StateUnavailable:
		return outcomeUnavailable, l.Err
	case l.Err != nil:
		return outcomeFailed, l.Err
	case l.State != termsig.StateRunning:
		return outcomeFailed, errors.New("its Watch returned at once, without an error")
	}
	return outcomeReady, nil
}

// jsonRow is one line of --json.
type jsonRow struct {
	Source    string           `json:"source"`
	Local     bool             `json:"local"`
	Applies   bool             `json:"applies"`
	Reason    string           `json:"reason,omitempty"`     // why it does not apply
	FirstLook string           `json:"first_look,omitempty"` // ready, failed, unavailable or timeout
	TookMS    *float64         `json:"took_ms,omitempty"`
	Error     string           `json:"error,omitempty"` // of the first look
	Notices   []termsig.Notice `json:"notices,omitempty"`
}

func (r row) json() jsonRow {
	name := r.choice.Source.Name()
	j := jsonRow{Source: name, Local: r.local(), Applies: r.applies()}
	if !r.choice.Chosen {
		j.Reason = reason(name, r.choice.Err)
		return j
	}
	outcome, err := r.outcome()
	ms := float64(r.look.Took.Round(time.Microsecond)) / float64(time.Millisecond)
	j.FirstLook, j.TookMS, j.Notices = outcome, &ms, r.look.Notices
	if err != nil {
		j.Error = err.Error()
	}
	if !j.Applies && err != nil {
		j.Reason = reason(name, err)
	}
	return j
}

// writeTable writes one line per source, and one more per notice its
// first look found.
func writeTable(w io.Writer, rows []row, interrupted bool) {
	width := 0
	for _, r := range rows {
		width = max(width, len(r.choice.Source.Name()))
	}
	for _, r := range rows {
		name := r.choice.Source.Name()
		verdict, text := "applies", ""
		switch {
		case !r.choice.Chosen:
			verdict, text = "no", reason(name, r.choice.Err)
		case !r.applies():
			verdict, text = "no", r.lookText(interrupted)
		default:
			text = r.lookText(interrupted)
		}
		fmt.Fprintf(w, "%-*s  %-7s  %s\n", width, name, verdict, text)
		if r.look != nil {
			for _, nt := range r.look.Notices {
				fmt.Fprintf(w, "%-*s  %-7s    notice: %s\n", width, "", "", nt)
			}
		}
	}
}

// lookText says how the first look of a chosen source went.
func (r row) lookText(interrupted bool) string {
	took := ms(r.look.Took)
	switch outcome, err := r.outcome(); outcome {
	case outcomeReady:
		return "first look: ready in " + took
	case outcomeUnavailable:
		return fmt.Sprintf("first look (%s): %s", took, reason(r.choice.Source.Name(), err))
	case outcomeFailed:
		if r.look.State == termsig.StateRunning {
			return fmt.Sprintf("first look: failed in %s, retrying: %v", took, err)
		}
		return fmt.Sprintf("first look: failed in %s: %v", took, err)
	default:
		why := "--timeout"
		if interrupted {
			why = "interrupted"
		}
		s := fmt.Sprintf("first look: still waiting after %s (%s)", took, why)
		if err != nil {
			s += fmt.Sprintf(", last error: %v", err)
		}
		return s
	}
}

// reason is err without what the table says already: the source's name
// in front, and termsig.ErrUnavailable's text at the end.
func reason(name string, err error) string {
	s := strings.TrimPrefix(err.Error(), name+": ")
	return strings.TrimSuffix(s, ": "+termsig.ErrUnavailable.Error())
}

// ms formats d in milliseconds below a second, such as "0.2 ms", and in
// seconds above, such as "5.0 s".
func ms(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

package sources

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/signal"
)

// Config tunes [Detect]. The zero Config is ready to use.
type Config struct {
	// Logger receives one line saying what was detected, and is handed to
	// the sources whose own Config has no Logger. Nil means no logging.
	Logger *slog.Logger

	// Signals are the signals to watch; nil means signal.New's defaults
	// (SIGTERM, SIGINT and SIGHUP).
	Signals []os.Signal

	// IMDS configures the imds source, if it applies.
	IMDS imds.Config

	// Root is where the host's files are read from (DMI under
	// sys/class/dmi/id); empty means "/". It is handed to the sources whose
	// own Config has no Root. Tests point it at a directory of their own.
	Root string
}

// Detect returns the sources that apply on this host, in this order:
//
//   - signal: always;
//   - imds: on EC2 (DMI), or when an IMDS endpoint is configured or set in
//     AWS_EC2_METADATA_SERVICE_ENDPOINT, unless AWS_EC2_METADATA_DISABLED
//     is true.
//
// Detection reads only local facts (DMI files, environment variables), so
// it is fast and never probes the network. Hand the result to termsig.New.
func Detect(cfg Config) []termsig.Source {
	srcs := []termsig.Source{signal.New(cfg.Signals...)}

	ic := cfg.IMDS
	inherit(&ic.Logger, &ic.Root, cfg)
	if s := imds.New(ic); s.Available() == nil {
		srcs = append(srcs, s)
	}

	if cfg.Logger != nil {
		names := make([]string, len(srcs))
		for i, s := range srcs {
			names[i] = s.Name()
		}
		cfg.Logger.Info("termsig: detected sources", "sources", names)
	}
	return srcs
}

// Names are the names ByName knows, in Detect's order.
var names = []string{signal.Name, imds.Name}

// ByName returns the sources named in names (such as "signal", "imds"),
// configured by cfg, whether or not they apply on this host: one that does
// not returns termsig.ErrUnavailable from Watch and retires quietly. It is
// for programs that let the user choose; Detect chooses by itself. An
// unknown or repeated name is an error.
func ByName(cfg Config, names ...string) ([]termsig.Source, error) {
	var srcs []termsig.Source
	seen := map[string]bool{}
	for _, name := range names {
		name = strings.TrimSpace(name)
		if seen[name] {
			return nil, fmt.Errorf("sources: %q named twice", name)
		}
		seen[name] = true
		switch name {
		case signal.Name:
			srcs = append(srcs, signal.New(cfg.Signals...))
		case imds.Name:
			ic := cfg.IMDS
			inherit(&ic.Logger, &ic.Root, cfg)
			srcs = append(srcs, imds.New(ic))
		default:
			return nil, fmt.Errorf("sources: unknown source %q (known: %s)", name, strings.Join(Names(), ", "))
		}
	}
	return srcs, nil
}

// Names returns the names of the sources this package knows.
func Names() []string { return append([]string(nil), names...) }

// inherit fills a source's Logger and Root from cfg where they are unset.
func inherit(logger **slog.Logger, root *string, cfg Config) {
	if *logger == nil {
		*logger = cfg.Logger
	}
	if *root == "" {
		*root = cfg.Root
	}
}

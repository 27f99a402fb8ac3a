package sources

import (
	"log/slog"
	"os"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/host"
	"github.com/termsig/termsig/signal"
)

// Config tunes [Detect]. The zero Config is ready to use.
type Config struct {
	// Logger receives one line saying what was detected, and is handed to
	// the sources that take one. Nil means no logging.
	Logger *slog.Logger

	// Signals are the signals to watch; nil means signal.New's defaults
	// (SIGTERM, SIGINT and SIGHUP).
	Signals []os.Signal

	// Root is where the host's files are read from (DMI under
	// sys/class/dmi/id); empty means "/". Tests point it at a directory
	// of their own.
	Root string

	// Getenv reads environment variables; nil means os.Getenv.
	Getenv func(string) string
}

// Detect returns the sources that apply on this host, in this order:
//
//   - signal: always.
//
// Detection reads only local facts (DMI files, environment variables such as
// AWS_EC2_METADATA_SERVICE_ENDPOINT and GCE_METADATA_HOST), so it is fast and
// never probes the network. Hand the result to termsig.New.
func Detect(cfg Config) []termsig.Source {
	root := cfg.Root
	if root == "" {
		root = "/"
	}
	in := host.Detect(root, cfg.Getenv)
	srcs := []termsig.Source{signal.New(cfg.Signals...)}
	if cfg.Logger != nil {
		names := make([]string, len(srcs))
		for i, s := range srcs {
			names[i] = s.Name()
		}
		cfg.Logger.Info("termsig: detected sources", "sources", names, "ec2", in.EC2, "gce", in.GCE, "azure", in.Azure)
	}
	return srcs
}

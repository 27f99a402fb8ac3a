package sources

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/asg"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/signal"
	"github.com/termsig/termsig/tencent"
)

// Config tunes [Detect]. The zero Config is ready to use.
type Config struct {
	// Logger receives one line saying what was detected and, at debug
	// level, one line per source left out with its reason; it is handed
	// to the sources whose own Config has no Logger. Nil means no line
	// from Detect, and slog.Default() for the sources.
	Logger *slog.Logger

	// Signals are the signals to watch; nil means signal.New's defaults
	// (SIGTERM, SIGINT and SIGHUP).
	Signals []os.Signal

	// PlatformOnly leaves out the sources whose notices concern only this
	// process (termsig.Traits.Local: the signal source), for a program
	// that watches the host for others, such as a node drainer, or that
	// adds a signal source of its own.
	PlatformOnly bool

	// IMDS configures the imds source, if it applies.
	IMDS imds.Config

	// ASG configures the asg source, if it applies. Its IMDS endpoint,
	// Root and intervals are IMDS's where it sets none.
	ASG asg.Config

	// GCE configures the gcemeta source, if it applies.
	GCE gcemeta.Config

	// Azure configures the azure source, if it applies.
	Azure azure.Config

	// Alibaba configures the alibaba source, if it applies.
	Alibaba alibaba.Config

	// Tencent configures the tencent source, if it applies.
	Tencent tencent.Config

	// ACPI configures the acpi source, if it applies.
	ACPI acpi.Config

	// Logind configures the logind source, if it applies.
	Logind logind.Config

	// Root is where the host's files are read from (DMI under
	// sys/class/dmi/id, acpid's and the system bus's sockets); empty means
	// "/", this machine, which on Windows
	// means its registry instead. It is handed to the sources whose own
	// Config has no Root. Tests point it at a directory of their own, laid
	// out like Linux's, which is read the same way on every system.
	Root string
}

// Detect returns the sources that apply on this host, in this order:
//
//   - signal: always, unless PlatformOnly is set;
//   - imds: on EC2, or when an IMDS endpoint is configured or set in
//     AWS_EC2_METADATA_SERVICE_ENDPOINT, unless AWS_EC2_METADATA_DISABLED
//     is true;
//   - asg: where imds applies, unless no credentials can be had (see
//     asg.Source.Available). It holds a scale-in with the group's
//     termination hooks until the program releases the notice; imds then
//     leaves the lifecycle state to it, so that a scale-in is one notice;
//   - gcemeta: on GCE, or when GCE_METADATA_HOST or GCE.Host is set;
//   - azure: on Azure, or when AZURE_METADATA_ENDPOINT or Azure.Endpoint
//     is set;
//   - alibaba: on an Alibaba Cloud ECS instance, or when
//     ALIBABA_METADATA_ENDPOINT or Alibaba.Endpoint is set;
//   - tencent: on a Tencent Cloud CVM instance, or when
//     TENCENT_METADATA_ENDPOINT or Tencent.Endpoint is set;
//   - acpi: on Linux only, when a power-button transport is available: the
//     kernel's acpi_event netlink family, acpid's socket, or an input
//     device with KEY_POWER;
//   - logind: on Linux only, when the system bus's socket exists (the
//     address in Logind.Address or DBUS_SYSTEM_BUS_ADDRESS, or else
//     run/dbus/system_bus_socket or var/run/dbus/system_bus_socket below
//     Root). Whether systemd-logind is on the bus is found out by the
//     source's Watch, which retires quietly when it is not. The source
//     holds the host's shutdowns with a delay lock until the program
//     releases the notice (termsig.Notifier.Release) or exits, at most
//     logind's InhibitDelayMaxSec: a program that only listens sets
//     Logind.NoLock.
//
// The clouds are recognised by the strings of the machine's firmware
// (SMBIOS), read where each system shows them:
//
//   - Linux: the DMI files under /sys/class/dmi/id and /sys/hypervisor/uuid;
//   - Windows: the BIOS values of the registry key
//     HKEY_LOCAL_MACHINE\HARDWARE\DESCRIPTION\System\BIOS;
//   - macOS: none, so there only the environment variables and the
//     configuration select the cloud sources.
//
// A Nitro EC2 instance has "Amazon EC2" as its system or board vendor
// (Windows: also as its BIOS vendor); a Xen one a UUID starting with "ec2"
// (Linux) or a BIOS version ending in ".amazon" (Windows). A GCE instance
// has the product name "Google Compute Engine" or "Google". An Azure VM
// has the chassis asset tag 7783-7084-3265-9085-8269-3286-77. An ECS
// instance has the product name "Alibaba Cloud ECS", a CVM instance
// "Tencent Cloud CVM", as cloud-init recognises them.
//
// A source whose configuration is wrong (an endpoint that is not a URL,
// an interval below the floor, an acpid socket that is not there) is
// included: its Watch fails at once with a message saying what to fix.
//
// Detection reads only these local facts, so it is fast and never probes
// the network. Hand the result to termsig.New.
//
// Each source left out is logged at debug level on cfg.Logger, with its
// reason (see [Explain]), and the sources chosen at level Info.
func Detect(cfg Config) []termsig.Source {
	var srcs []termsig.Source
	names := []string{}
	for _, c := range Explain(cfg) {
		if c.Chosen {
			srcs = append(srcs, c.Source)
			names = append(names, c.Source.Name())
		} else if cfg.Logger != nil {
			cfg.Logger.Debug("termsig: source left out", "source", c.Source.Name(), "reason", c.Err)
		}
	}
	if cfg.Logger != nil {
		cfg.Logger.Info("termsig: detected sources", "sources", names)
	}
	return srcs
}

// A kind of source that this package knows: adding a source is one entry
// in known. Detect includes a source that is not a termsig.Detector
// always, and a Detector when it applies (see applies).
type kind struct {
	name  string
	build func(Config) termsig.Source
}

// known are the sources, in Detect's order.
var known = []kind{
	{signal.Name, func(c Config) termsig.Source { return signal.New(c.Signals...) }},
	{imds.Name, func(c Config) termsig.Source { return imds.New(imdsConfig(c)) }},
	{asg.Name, func(c Config) termsig.Source { return asg.New(asgConfig(c)) }},
	{gcemeta.Name, func(c Config) termsig.Source { return gcemeta.New(gceConfig(c)) }},
	{azure.Name, func(c Config) termsig.Source { return azure.New(azureConfig(c)) }},
	{alibaba.Name, func(c Config) termsig.Source { return alibaba.New(alibabaConfig(c)) }},
	{tencent.Name, func(c Config) termsig.Source { return tencent.New(tencentConfig(c)) }},
	{acpi.Name, func(c Config) termsig.Source { return acpi.New(acpiConfig(c)) }},
	{logind.Name, func(c Config) termsig.Source { return logind.New(logindConfig(c)) }},
}

// local reports whether s's notices concern only this process.
func local(s termsig.Source) bool {
	d, ok := s.(termsig.Describer)
	return ok && d.Traits().Local
}

// applies reports whether a source whose Available returned err belongs
// in Detect's result: it works here, or it is misconfigured, in which case
// its Watch fails at once and the failure shows in the log and in
// Notifier.Status rather than the source silently missing.
func applies(err error) bool { return !errors.Is(err, termsig.ErrUnavailable) }

// ByName returns the sources named in names (such as "signal", "imds"),
// configured by cfg, whether or not they apply on this host: one that does
// not returns termsig.ErrUnavailable from Watch and retires quietly. It is
// for programs that let the user choose; Detect chooses by itself. An
// unknown or repeated name is an error, and so is a source whose notices
// concern only this process (signal) when cfg.PlatformOnly is set.
func ByName(cfg Config, names ...string) ([]termsig.Source, error) {
	var srcs []termsig.Source
	seen := map[string]bool{}
	for _, name := range names {
		name = strings.TrimSpace(name)
		if seen[name] {
			return nil, fmt.Errorf("sources: %q named twice", name)
		}
		seen[name] = true
		i := slices.IndexFunc(known, func(k kind) bool { return k.name == name })
		if i < 0 {
			return nil, fmt.Errorf("sources: unknown source %q (known: %s)", name, strings.Join(Names(), ", "))
		}
		s := known[i].build(cfg)
		if cfg.PlatformOnly && local(s) {
			return nil, fmt.Errorf("sources: %q watches this process only, and PlatformOnly is set", name)
		}
		srcs = append(srcs, s)
	}
	if seen[asg.Name] && seen[imds.Name] {
		for i, s := range srcs {
			if s.Name() == imds.Name {
				srcs[i] = imds.New(imdsConfig(leaveLifecycle(cfg)))
			}
		}
	}
	return srcs, nil
}

// leaveLifecycle is cfg with an imds source that leaves the lifecycle
// state to the asg source.
// (An imds source that watches the lifecycle state only is left as it
// is: zero Events would mean all of them.)
func leaveLifecycle(cfg Config) Config {
	if ev := cmp.Or(cfg.IMDS.Events, imds.AllEvents) &^ imds.LifecycleState; ev != 0 {
		cfg.IMDS.Events = ev
	}
	return cfg
}

// Names returns the names of the sources this package knows, in Detect's
// order.
func Names() []string {
	names := make([]string, len(known))
	for i, k := range known {
		names[i] = k.name
	}
	return names
}

// imdsConfig is cfg.IMDS with cfg's Logger and Root where it has none.
func imdsConfig(cfg Config) imds.Config {
	ic := cfg.IMDS
	inherit(&ic.Logger, &ic.Root, cfg)
	return ic
}

// asgConfig is cfg.ASG with cfg's Logger and Root where it has none, and
// IMDS's endpoint and polling where its own IMDS has none.
func asgConfig(cfg Config) asg.Config {
	ac := cfg.ASG
	ic := imdsConfig(cfg)
	if ac.Logger == nil {
		ac.Logger = cfg.Logger
	}
	ac.IMDS.Endpoint = cmp.Or(ac.IMDS.Endpoint, ic.Endpoint)
	ac.IMDS.Root = cmp.Or(ac.IMDS.Root, ic.Root)
	ac.IMDS.Interval = cmp.Or(ac.IMDS.Interval, ic.Interval)
	ac.IMDS.AdvisoryInterval = cmp.Or(ac.IMDS.AdvisoryInterval, ic.AdvisoryInterval)
	ac.IMDS.RequestTimeout = cmp.Or(ac.IMDS.RequestTimeout, ic.RequestTimeout)
	ac.IMDS.MaxBackoff = cmp.Or(ac.IMDS.MaxBackoff, ic.MaxBackoff)
	if ac.IMDS.HTTPClient == nil {
		ac.IMDS.HTTPClient = ic.HTTPClient
	}
	return ac
}

// gceConfig is cfg.GCE with cfg's Logger and Root where it has none.
func gceConfig(cfg Config) gcemeta.Config {
	gc := cfg.GCE
	inherit(&gc.Logger, &gc.Root, cfg)
	return gc
}

// azureConfig is cfg.Azure with cfg's Logger and Root where it has none.
func azureConfig(cfg Config) azure.Config {
	ac := cfg.Azure
	inherit(&ac.Logger, &ac.Root, cfg)
	return ac
}

// alibabaConfig is cfg.Alibaba with cfg's Logger and Root where it has
// none.
func alibabaConfig(cfg Config) alibaba.Config {
	ac := cfg.Alibaba
	inherit(&ac.Logger, &ac.Root, cfg)
	return ac
}

// tencentConfig is cfg.Tencent with cfg's Logger and Root where it has
// none.
func tencentConfig(cfg Config) tencent.Config {
	tc := cfg.Tencent
	inherit(&tc.Logger, &tc.Root, cfg)
	return tc
}

// acpiConfig is cfg.ACPI with cfg's Logger and Root where it has none
// and, under a Root other than "/" (a test's fake host), only the
// transports that are files, looked for under Root: the kernel's netlink
// family cannot be redirected. The places stay unset, so that acpi takes
// them for defaults, which may be missing, and not for paths that the
// user promised are there.
func acpiConfig(cfg Config) acpi.Config {
	ac := cfg.ACPI
	inherit(&ac.Logger, &ac.Root, cfg)
	if cfg.Root != "" && cfg.Root != "/" && ac.Transports == 0 {
		ac.Transports = acpi.Acpid | acpi.Input
	}
	return ac
}

// logindConfig is cfg.Logind with cfg's Logger and Root where it has none.
func logindConfig(cfg Config) logind.Config {
	lc := cfg.Logind
	inherit(&lc.Logger, &lc.Root, cfg)
	return lc
}

// inherit fills a source's Logger and Root from cfg where they are unset.
func inherit(logger **slog.Logger, root *string, cfg Config) {
	if *logger == nil {
		*logger = cfg.Logger
	}
	if *root == "" {
		*root = cfg.Root
	}
}

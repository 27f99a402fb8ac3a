package fake

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/termsig/termsig/gcemeta/gcemetatest"
)

// What Google documents: a spot or preemptible VM is powered off (ACPI G3)
// 30 s after its preemption's soft-off, and instance/maintenance-event
// changes 60 s before the maintenance event.
const (
	preemptionNotice  = 30 * time.Second
	maintenanceNotice = 60 * time.Second
)

// The values of instance/maintenance-event that --maintenance takes, and
// what a real VM goes through when the event starts.
const (
	migrateOnMaintenance   = "MIGRATE_ON_HOST_MAINTENANCE"
	terminateOnMaintenance = "TERMINATE_ON_HOST_MAINTENANCE"
)

var maintenanceDone = map[string]string{
	migrateOnMaintenance:   "live-migrated",
	terminateOnMaintenance: "stopped",
}

var gceKind = kind{
	name:   "gce",
	listen: "127.0.0.1:1339",
	env:    "GCE_METADATA_HOST",
	usage:  usageGCE,
	// GCE_METADATA_HOST is a host[:port], not a URL.
	envValue: func(base string) string { return strings.TrimPrefix(base, "http://") },
	flags: func(fs *flag.FlagSet) func(map[string]bool) (script, error) {
		sc := &gceScript{value: choice{v: migrateOnMaintenance, words: []string{migrateOnMaintenance, terminateOnMaintenance}}}
		fs.Var(&sc.preemptIn, "preempt-in", "")
		fs.Var(&sc.maintenanceIn, "maintenance-in", "")
		fs.Var(&sc.value, "maintenance", "")
		return func(set map[string]bool) (script, error) {
			if err := needs(set, "maintenance-in", "maintenance"); err != nil {
				return nil, err
			}
			sc.preempt, sc.maintenance = set["preempt-in"], set["maintenance-in"]
			return sc, nil
		}
	},
}

// gceScript is the flags of termsig fake gce.
type gceScript struct {
	preempt       bool // --preempt-in given
	preemptIn     duration
	maintenance   bool // --maintenance-in given
	maintenanceIn duration
	value         choice
}

func (sc *gceScript) start(t0 time.Time) *running {
	srv := gcemetatest.NewServer()
	r := &running{handler: srv, close: srv.Close}
	var plan []string
	if sc.preempt {
		appear := t0.Add(sc.preemptIn.d)
		plan = append(plan, "a preemption at "+rfc3339(appear))
		r.steps = append(r.steps,
			step{appear, func() string {
				srv.Set(gcemetatest.Preempted, "TRUE")
				return fmt.Sprintf("preemption: %s answers TRUE; a real VM gets an ACPI soft-off now (the fake sends none) and is powered off %s later",
					gcemetatest.Preempted, preemptionNotice)
			}},
			step{appear.Add(preemptionNotice), func() string {
				return fmt.Sprintf("%s after the preemption: a real VM would be powered off now (the fake goes on serving)", preemptionNotice)
			}})
	}
	if sc.maintenance {
		appear, value := t0.Add(sc.maintenanceIn.d), sc.value.v
		plan = append(plan, fmt.Sprintf("host maintenance (%s) at %s", value, rfc3339(appear)))
		r.steps = append(r.steps,
			step{appear, func() string {
				srv.Set(gcemetatest.MaintenanceEvent, value)
				return fmt.Sprintf("maintenance notice: %s answers %s; the event starts in %s", gcemetatest.MaintenanceEvent, value, maintenanceNotice)
			}},
			step{appear.Add(maintenanceNotice), func() string {
				return fmt.Sprintf("maintenance starts: a real VM would be %s now (the fake goes on serving %s)", maintenanceDone[value], value)
			}})
	}
	r.plan = planLine(plan)
	r.steps = sortSteps(r.steps)
	return r
}

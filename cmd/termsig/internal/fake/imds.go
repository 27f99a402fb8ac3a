package fake

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/termsig/termsig/imds/imdstest"
)

// spotNotice is how long before its time EC2 issues a spot interruption
// notice ("about 2 minutes").
const spotNotice = 2 * time.Minute

// The spot actions, and what a real instance would go through at the
// interruption's time.
var spotActions = []string{"terminate", "stop", "hibernate"}

var spotDone = map[string]string{"terminate": "terminated", "stop": "stopped", "hibernate": "hibernated"}

var imdsKind = kind{
	name:     "imds",
	listen:   "127.0.0.1:1338",
	env:      "AWS_EC2_METADATA_SERVICE_ENDPOINT",
	usage:    usageIMDS,
	envValue: func(base string) string { return base },
	flags: func(fs *flag.FlagSet) func(map[string]bool) (script, error) {
		sc := &imdsScript{action: choice{v: "terminate", words: spotActions}, notice: duration{spotNotice}}
		fs.Var(&sc.spotIn, "spot-in", "")
		fs.Var(&sc.action, "action", "")
		fs.Var(&sc.notice, "notice", "")
		fs.Var(&sc.rebalanceIn, "rebalance-in", "")
		return func(set map[string]bool) (script, error) {
			if err := needs(set, "spot-in", "action", "notice"); err != nil {
				return nil, err
			}
			sc.spot, sc.rebalance = set["spot-in"], set["rebalance-in"]
			return sc, nil
		}
	},
}

// imdsScript is the flags of termsig fake imds.
type imdsScript struct {
	spot        bool // --spot-in given
	spotIn      duration
	action      choice
	notice      duration
	rebalance   bool // --rebalance-in given
	rebalanceIn duration
}

// imdsTime is how IMDS writes the times of spot/instance-action and of
// the rebalance recommendation: RFC 3339, UTC, whole seconds.
func imdsTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

func (sc *imdsScript) start(t0 time.Time) *running {
	srv := imdstest.NewServer()
	r := &running{handler: srv, close: srv.Close}
	var plan []string
	if sc.spot {
		appear := t0.Add(sc.spotIn.d)
		// The time IMDS gives is whole seconds: truncated, so that the
		// deadline is never later than --notice says.
		at := appear.Add(sc.notice.d).Truncate(time.Second)
		action := sc.action.v
		plan = append(plan, fmt.Sprintf("a spot interruption (%s) at %s, its time %s", action, rfc3339(appear), imdsTime(at)))
		body, _ := json.Marshal(map[string]string{"action": action, "time": imdsTime(at)})
		r.steps = append(r.steps,
			step{appear, func() string {
				srv.SetInterruption(action, at)
				return "spot interruption: " + imdstest.PathInstanceAction + " answers " + string(body)
			}},
			step{at, func() string {
				return fmt.Sprintf("the spot interruption's time: a real instance would be %s now (the fake goes on serving)", spotDone[action])
			}})
	}
	if sc.rebalance {
		appear := t0.Add(sc.rebalanceIn.d)
		plan = append(plan, "a rebalance recommendation at "+rfc3339(appear))
		r.steps = append(r.steps, step{appear, func() string {
			now := time.Now().Truncate(time.Second)
			srv.SetRebalance(now)
			body, _ := json.Marshal(map[string]string{"noticeTime": imdsTime(now)})
			return "rebalance recommendation: " + imdstest.PathRebalance + " answers " + string(body)
		}})
	}
	r.plan = planLine(plan)
	r.steps = sortSteps(r.steps)
	return r
}

// planLine says what is scheduled.
func planLine(plan []string) string {
	if len(plan) == 0 {
		return "a quiet host: nothing scheduled"
	}
	return "scheduled: " + strings.Join(plan, "; ")
}

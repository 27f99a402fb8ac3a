package fake

import (
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/tencent/tencenttest"
)

const usageAlibaba = `termsig fake alibaba [flags]   Alibaba Cloud ECS metadata service
  --listen ADDR        where to serve (default 127.0.0.1:1341)
  --spot-in D          a spot instance's release D from now:
                       instance/spot/termination-time answers its time
  --notice D           its time, D after it appears (default 5m, about what
                       Alibaba gives)
  --hardened           the security hardening mode only: a request without a
                       token gets 403 (default: both modes, as on a new instance)
  Try it:
    termsig fake alibaba --spot-in 10s &
    ALIBABA_METADATA_ENDPOINT=http://127.0.0.1:1341 termsig print --sources alibaba
`

const usageTencent = `termsig fake tencent [flags]   Tencent Cloud CVM metadata service
  --listen ADDR        where to serve (default 127.0.0.1:1342)
  --spot-in D          a spot instance's reclaim D from now: spot/termination-time
                       answers its time, in UTC+8 without a zone, as Tencent writes it
  --notice D           its time, D after it appears (default 2m, as Tencent gives)
  Try it:
    termsig fake tencent --spot-in 10s &
    TENCENT_METADATA_ENDPOINT=http://127.0.0.1:1342 termsig print --sources tencent
`

// A spotCloud is a cloud whose metadata service posts a spot instance's
// termination time on one path.
type spotCloud struct {
	path   string                 // the path that answers the time
	format func(time.Time) string // how the service writes the time
	event  string                 // what the time is of: "release"
	done   string                 // what a real instance is then: "released"
	tokens bool                   // the service has a hardening mode (--hardened)
	// newFake returns the fake; hardened: tokens required.
	newFake func(hardened bool) spotFake
}

// A spotFake is the fake metadata service of a spotCloud.
type spotFake interface {
	http.Handler
	SetTerminationTime(time.Time)
	Close()
}

var alibabaKind = spotKind("alibaba", "127.0.0.1:1341", "ALIBABA_METADATA_ENDPOINT", usageAlibaba, 5*time.Minute, spotCloud{
	path:   alibabatest.PathTerminationTime,
	format: alibabatest.FormatTime,
	event:  "release",
	done:   "released",
	tokens: true,
	newFake: func(hardened bool) spotFake {
		srv := alibabatest.NewServer()
		srv.SetTokensRequired(hardened)
		return srv
	},
})

var tencentKind = spotKind("tencent", "127.0.0.1:1342", "TENCENT_METADATA_ENDPOINT", usageTencent, 2*time.Minute, spotCloud{
	path:    tencenttest.PathTerminationTime,
	format:  tencenttest.FormatTime,
	event:   "reclaim",
	done:    "reclaimed",
	newFake: func(bool) spotFake { return tencenttest.NewServer() },
})

// spotKind returns the kind of a spotCloud's fake, whose --notice is
// notice by default.
func spotKind(name, listen, env, usage string, notice time.Duration, c spotCloud) kind {
	return kind{
		name:     name,
		listen:   listen,
		env:      env,
		usage:    usage,
		envValue: func(base string) string { return base },
		flags: func(fs *flag.FlagSet) func(map[string]bool) (script, error) {
			sc := &spotScript{cloud: c, notice: duration{notice}}
			fs.Var(&sc.spotIn, "spot-in", "")
			fs.Var(&sc.notice, "notice", "")
			if c.tokens {
				fs.BoolVar(&sc.hardened, "hardened", false, "")
			}
			return func(set map[string]bool) (script, error) {
				if err := needs(set, "spot-in", "notice"); err != nil {
					return nil, err
				}
				sc.spot = set["spot-in"]
				return sc, nil
			}
		},
	}
}

// spotScript is the flags of the fake of a spotCloud.
type spotScript struct {
	cloud    spotCloud
	spot     bool // --spot-in given
	spotIn   duration
	notice   duration
	hardened bool
}

func (sc *spotScript) start(t0 time.Time) *running {
	c := sc.cloud
	srv := c.newFake(sc.hardened)
	r := &running{handler: srv, close: srv.Close}
	var plan []string
	if sc.spot {
		appear := t0.Add(sc.spotIn.d)
		// The time is whole seconds: truncated, so that the deadline is
		// never later than --notice says.
		at := appear.Add(sc.notice.d).Truncate(time.Second)
		plan = append(plan, fmt.Sprintf("a spot instance's %s at %s, its time %s", c.event, rfc3339(appear), c.format(at)))
		r.steps = append(r.steps,
			step{appear, func() string {
				srv.SetTerminationTime(at)
				return fmt.Sprintf("spot %s: %s answers %s", c.event, c.path, c.format(at))
			}},
			step{at, func() string {
				return fmt.Sprintf("the spot %s's time: a real instance would be %s now (the fake goes on serving)", c.event, c.done)
			}})
	}
	r.plan = planLine(plan)
	if sc.hardened {
		r.plan += "; the security hardening mode only (a request without a token gets 403)"
	}
	r.steps = sortSteps(r.steps)
	return r
}

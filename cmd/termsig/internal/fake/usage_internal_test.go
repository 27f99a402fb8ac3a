package fake

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Usage, which is written by hand, lists every flag of each fake with its
// default, in that fake's part.
func TestUsageListsEveryFlagWithItsDefault(t *testing.T) {
	for name, k := range kinds {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("listen", k.listen, "")
		k.flags(fs)
		assert.Contains(t, Usage, k.usage)
		fs.VisitAll(func(f *flag.Flag) {
			i := strings.Index(k.usage, "  --"+f.Name+" ")
			if !assert.GreaterOrEqual(t, i, 0, "%s --%s", name, f.Name) {
				return
			}
			switch def := f.DefValue; {
			case def == "" || def == "0s" || def == "false":
				// no default: the event is not scheduled, the mode not set
			case f.Name == "notice" && strings.HasSuffix(def, "m0s"):
				// written as people write minutes: "(default 2m, ..."
				assert.Contains(t, k.usage[i:], "(default "+strings.TrimSuffix(def, "0s")+",", "%s --notice", name)
			default:
				assert.Contains(t, k.usage[i:], "(default "+def, "%s --%s", name, f.Name)
			}
		})
	}
}

package sources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig/sources"
)

func names(t *testing.T, cfg sources.Config) []string {
	t.Helper()
	var out []string
	for _, s := range sources.Detect(cfg) {
		out = append(out, s.Name())
	}
	return out
}

func TestDetectAlwaysHasSignals(t *testing.T) {
	empty := func(string) string { return "" }
	assert.Equal(t, []string{"signal"}, names(t, sources.Config{Root: t.TempDir(), Getenv: empty}))
}

func TestDetectOnThisHost(t *testing.T) {
	assert.Contains(t, names(t, sources.Config{}), "signal")
}

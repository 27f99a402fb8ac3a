package sourcescmd

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig/sources"
)

// Usage is a constant, written by hand: it must say what the code does.
func TestUsageNamesTheKnownSourcesAndTheDefaultTimeout(t *testing.T) {
	words := strings.Join(strings.Fields(Usage), " ") // the list may go on over lines
	assert.Contains(t, words, "only these sources: "+strings.Join(sources.Names(), ", ")+" --root")
	assert.Contains(t, Usage, "(default "+defaultTimeout.String()+")")
}

func TestUsageGivesEveryExitStatus(t *testing.T) {
	for _, status := range []int{exitApplies, exitNone, exitUsage, exitInterrupted} {
		assert.Regexp(t, `[ \n]`+strconv.Itoa(status)+` (if|on) `, Usage, "exit status %d", status)
	}
}

package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
)

// TestFullRecordKeepsImminentReason: a record at maxReasons makes room
// by dropping advice, never an imminent reason.
func TestFullRecordKeepsImminentReason(t *testing.T) {
	var rec record
	rec.add(reason{Source: "imds", Event: "spot/instance-action", Kind: termsig.Terminate, Drain: true})
	for i := range maxReasons {
		rec.add(reason{Source: "azure", Event: fmt.Sprint("e-", i), Kind: termsig.Maintenance})
	}
	assert.True(t, rec.has("imds", "spot/instance-action"), "the imminent reason was dropped for advice")
	assert.Equal(t, termsig.Terminate, rec.strongest())
}

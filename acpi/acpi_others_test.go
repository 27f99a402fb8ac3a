//go:build !linux

package acpi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
)

func TestUnavailableElsewhere(t *testing.T) {
	src := acpi.New(acpi.Config{})
	assert.Zero(t, src.Available())
	assert.ErrorIs(t, src.Watch(context.Background(), make(chan termsig.Notice)), termsig.ErrUnavailable)
}

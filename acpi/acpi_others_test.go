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

	// Places are Linux paths: they are not checked here.
	src = acpi.New(acpi.Config{AcpidSocket: "/nonexistent/acpid.socket", InputDevices: "["})
	assert.Zero(t, src.Available())
	assert.ErrorIs(t, src.Watch(context.Background(), make(chan termsig.Notice)), termsig.ErrUnavailable)

	// A value that is wrong everywhere is an error everywhere.
	src = acpi.New(acpi.Config{BackoffBase: -1})
	assert.NotZero(t, src.Available())
	err := src.Watch(context.Background(), make(chan termsig.Notice))
	assert.EqualError(t, err, "acpi: Config.BackoffBase is negative (-1ns); zero means the default")
}

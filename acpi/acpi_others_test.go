//go:build !linux

package acpi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
)

func TestUnavailableElsewhere(t *testing.T) {
	src := acpi.New(acpi.Config{})
	assert.ErrorIs(t, src.Available(), termsig.ErrUnavailable)
	_, err := watchOnce(t, src)
	assert.ErrorIs(t, err, termsig.ErrUnavailable)

	// Places are Linux paths: they are not checked here.
	src = acpi.New(acpi.Config{AcpidSocket: "/nonexistent/acpid.socket", InputDevices: "["})
	assert.ErrorIs(t, src.Available(), termsig.ErrUnavailable)
	_, err = watchOnce(t, src)
	assert.ErrorIs(t, err, termsig.ErrUnavailable)

	// A value that is wrong everywhere is an error everywhere.
	src = acpi.New(acpi.Config{Transports: acpi.Acpid | 0x80})
	const want = "acpi: Config.Transports (acpid+transport(0x80)) has bits outside AllTransports"
	assert.EqualError(t, src.Available(), want)
	_, err = watchOnce(t, src)
	assert.EqualError(t, err, want)
}

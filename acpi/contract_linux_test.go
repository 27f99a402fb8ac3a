package acpi_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/acpi"
	"github.com/termsig/termsig/acpi/acpitest"
	"github.com/termsig/termsig/termsigtest"
)

// The source keeps the contract of termsig.Source, watching acpid and an
// input device (the netlink transport is the kernel's: a test cannot drive
// it). A press of the fake device's power button is its notice.
func TestSourceKeepsContract(t *testing.T) {
	termsigtest.TestSource(t, func(t *testing.T) (termsig.Source, func()) {
		fake := newAcpid(t)
		in := newInput(t)
		dev, err := in.AddDevice("Power Button", acpitest.KeyPower)
		require.NoError(t, err)
		src := acpi.New(acpi.Config{
			Transports:   acpi.Acpid | acpi.Input,
			AcpidSocket:  fake.Path(),
			InputDevices: in.Devices(),
			Root:         in.Root(),
			Logger:       slog.New(slog.DiscardHandler),
		})
		return src, func() { require.NoError(t, dev.PressPowerButton()) }
	})
}

//go:build !linux

package acpitest

import (
	"errors"
	"fmt"
)

// An Input is a fake input subsystem. It needs Linux, as the acpi source's
// input transport does.
type Input struct{}

// NewInput returns an error wrapping errors.ErrUnsupported: the fake input
// devices are Linux FIFOs.
func NewInput() (*Input, error) {
	return nil, fmt.Errorf("acpitest: fake input devices need Linux: %w", errors.ErrUnsupported)
}

// Devices returns "".
func (in *Input) Devices() string { return "" }

// Root returns "".
func (in *Input) Root() string { return "" }

// Close does nothing.
func (in *Input) Close() error { return nil }

//go:build !linux

package logind

import (
	"errors"
	"fmt"

	"github.com/termsig/termsig"
)

// supported reports whether logind can exist on this system.
func supported() error { return fmt.Errorf("%w: %w", errNotLinux, termsig.ErrUnavailable) }

var errNotLinux = errors.New("logind: systemd-logind runs on Linux only")

// syscallClose does nothing: the source never connects here.
func syscallClose(int) {}

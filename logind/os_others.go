//go:build !linux

package logind

import (
	"fmt"

	"github.com/termsig/termsig"
)

// supported reports whether logind can exist on this system.
func supported() error { return fmt.Errorf("%w: %w", errNotLinux, termsig.ErrUnavailable) }

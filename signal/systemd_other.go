//go:build !linux

package signal

import (
	"context"
	"errors"
)

// lookupUnit fails: systemd runs on Linux only.
func lookupUnit(context.Context, Config, string) (unit, error) {
	return unit{}, &permanentError{errors.New("signal: systemd runs on Linux only")}
}

//go:build !linux

package logindtest

import "errors"

var errRealLinux = errors.New("logindtest: the real systemd-logind runs on Linux only")

// RealMissing says why the real logind cannot run here: it runs on Linux
// only.
func RealMissing(RealConfig) error { return errRealLinux }

// NewReal fails: the real logind runs on Linux only.
func NewReal(string, RealConfig) (*RealLogind, error) { return nil, errRealLinux }

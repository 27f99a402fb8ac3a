//go:build !linux

package acpi

// open finds no transport: the three of them are Linux interfaces, so that
// Watch and Available return ErrUnavailable.
func (c Config) open() []transport { return nil }

// checkPaths checks nothing: the places of the Config are Linux paths,
// which mean nothing here.
func (c Config) checkPaths() error { return nil }

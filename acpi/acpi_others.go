//go:build !linux

package acpi

// open finds no transport: the three of them are Linux interfaces, so that
// Watch returns ErrUnavailable and Available returns zero.
func (s *Source) open() []transport { return nil }

// checkPaths checks nothing: the places of the Config are Linux paths,
// which mean nothing here.
func (s *Source) checkPaths() error { return nil }

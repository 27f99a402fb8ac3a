//go:build !unix

package registry

// syncDir does nothing: Windows cannot fsync a directory, and os.Rename there
// (MoveFileEx with MOVEFILE_REPLACE_EXISTING) is as durable as it gets.
func syncDir(dir string) error { return nil }

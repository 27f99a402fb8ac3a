package logind

// supported reports whether logind can exist on this system.
func supported() error { return nil }

//go:build !race

package httpguard

// raceEnabled: built with the race detector.
const raceEnabled = false

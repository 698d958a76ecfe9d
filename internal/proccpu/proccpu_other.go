//go:build !unix && !windows

package proccpu

// Self reports that this system does not say (ok false).
func Self() (t Times, ok bool) { return Times{}, false }

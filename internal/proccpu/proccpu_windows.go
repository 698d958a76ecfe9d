//go:build windows

package proccpu

import (
	"time"

	"golang.org/x/sys/windows"
)

// Self returns the CPU time this process used so far; ok is false when
// the system would not say.
func Self() (t Times, ok bool) {
	var creation, exit, kernel, user windows.Filetime
	if windows.GetProcessTimes(windows.CurrentProcess(), &creation, &exit, &kernel, &user) != nil {
		return Times{}, false
	}
	// A Filetime counts 100 ns intervals.
	ticks := func(f windows.Filetime) time.Duration {
		return time.Duration(uint64(f.HighDateTime)<<32|uint64(f.LowDateTime)) * 100
	}
	return Times{User: ticks(user), System: ticks(kernel)}, true
}

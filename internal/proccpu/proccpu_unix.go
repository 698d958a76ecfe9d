//go:build unix

package proccpu

import (
	"syscall"
	"time"
)

// Self returns the CPU time this process used so far; ok is false when
// the system would not say.
func Self() (t Times, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return Times{}, false
	}
	return Times{User: time.Duration(ru.Utime.Nano()), System: time.Duration(ru.Stime.Nano())}, true
}

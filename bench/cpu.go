package bench

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) this process used so far,
// or 0 where getrusage is unavailable.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

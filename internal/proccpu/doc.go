// Package proccpu reads the CPU time this process has used, user and
// system apart: getrusage(2) on Unix, GetProcessTimes on Windows. The
// bench divides it by the work done (CPU per acquisition) and the proxy
// reports it in INFO cpu, as Redis reports its own.
package proccpu

import "time"

// Times is the CPU time a process used so far.
type Times struct {
	User, System time.Duration
}

// Total is user plus system time.
func (t Times) Total() time.Duration { return t.User + t.System }

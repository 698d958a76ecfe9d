//go:build linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// guardExe is the redlock binary to run the guard with: this process's own
// executable, even when its file was replaced or removed since it started.
func guardExe() (string, error) { return "/proc/self/exe", nil }

// monoNow reads CLOCK_MONOTONIC (ns): system-wide, the clock of Go's
// timers and monotonic readings on Linux.
func monoNow() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	return ts.Nano(), nil
}

// pidfdOpen opens a pidfd of process pid (Linux 5.3).
func pidfdOpen(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, os.NewSyscallError("pidfd_open", err)
	}
	return os.NewFile(uintptr(fd), "pidfd"), nil
}

// pidfdKill sends SIGKILL to the process of pidfd f.
func pidfdKill(f *os.File) error {
	return unix.PidfdSendSignal(int(f.Fd()), unix.SIGKILL, nil, 0)
}

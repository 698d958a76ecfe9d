//go:build linux

package main

import (
	"os"
	"time"

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

// waitReadable waits up to d (rounded up to a millisecond) for fd to be
// readable (or closed at the other end); d ≤ 0 only looks.
func waitReadable(fd int, d time.Duration) (bool, error) {
	ms := int((d + time.Millisecond - 1) / time.Millisecond)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, os.NewSyscallError("poll", err)
		}
		return n > 0, nil
	}
}

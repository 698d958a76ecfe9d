//go:build linux

package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// childAttr returns how the command is started: in a process group of its
// own when own (so that a loss can end everything it started), and killed
// if redlock lock itself dies (a SIGKILL or the OOM killer must not leave
// the command running without its lock).
func childAttr(own bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: own, Pdeathsig: syscall.SIGTERM}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

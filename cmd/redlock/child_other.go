//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// childAttr: a process group of its own when own (no parent-death signal
// outside Linux).
func childAttr(own bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: own} }

// isTerminal reports whether f is a character device (an approximation
// outside Linux).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

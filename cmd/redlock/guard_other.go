//go:build unix && !linux

package main

import (
	"os"
	"time"
)

// No lock guard outside Linux: redlock lock alone watches the validity.

func guardExe() (string, error)                     { return "", errGuardUnsupported }
func monoNow() (int64, error)                       { return 0, errGuardUnsupported }
func pidfdOpen(pid int) (*os.File, error)           { return nil, errGuardUnsupported }
func pidfdKill(f *os.File) error                    { return errGuardUnsupported }
func waitReadable(int, time.Duration) (bool, error) { return false, errGuardUnsupported }

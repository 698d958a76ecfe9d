//go:build !unix

package localmaster

import (
	"os"
	"syscall"
)

// Without POSIX signals, Stop kills the process and Pause/Resume fail.
var sigTerm, sigStop, sigCont os.Signal = os.Kill, nil, nil

func sysProcAttr() *syscall.SysProcAttr { return nil }

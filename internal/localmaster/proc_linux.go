//go:build linux

package localmaster

import (
	"os"
	"syscall"
)

var sigTerm, sigStop, sigCont os.Signal = syscall.SIGTERM, syscall.SIGSTOP, syscall.SIGCONT

// sysProcAttr puts redis-server in its own process group (so a terminal's
// Ctrl-C reaches only the parent) and has it killed if the parent dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

//go:build !unix

package main

import (
	"fmt"
	"os"
)

// Outside Unix the command only says why it does not run: redlock lock
// guards its command with process groups and POSIX signals. The packages
// (engine, proxy, bench) build on every system Go supports.
func main() {
	fmt.Fprintln(os.Stderr, "redlock: this command needs a Unix system (redlock lock guards its command with process groups and POSIX signals); the engine, proxy and bench packages build here")
	os.Exit(2)
}

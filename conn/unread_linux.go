package conn

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unreadBytes returns the bytes received on nc's socket and not read yet
// (SIOCINQ, i.e. FIONREAD; under TLS, the encrypted bytes).
func unreadBytes(nc net.Conn) int {
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n
}

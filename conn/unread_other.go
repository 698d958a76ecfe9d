//go:build !linux

package conn

import "net"

// unreadBytes is 0 where FIONREAD is not used: expiries then never wait
// for a reader that is behind, only for the replies it buffered.
func unreadBytes(net.Conn) int { return 0 }

//go:build !linux

package respserver

import (
	"net"
	"sync"
)

// LoopsSupported reports whether Config.EventLoops can be honoured here:
// the event loop is epoll's (loop_linux.go).
const LoopsSupported = false

type loop struct{ mu sync.Mutex }

func (l *loop) ready(*Conn)                   {}
func (s *Server) startLoops() error           { return nil }
func (s *Server) enroll(tc *net.TCPConn) bool { return false }
func (s *Server) stopLoops()                  {}
func (s *Server) interruptLoops()             {}

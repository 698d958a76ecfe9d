//go:build !linux

package proxy

import (
	"net"
	"sync"
)

// loopsSupported reports whether Config.EventLoops can be honoured here:
// the event loop is epoll's (loop_linux.go).
const loopsSupported = false

type loop struct{ mu sync.Mutex }

func (l *loop) ready(*client)                 {}
func (s *Server) startLoops() error           { return nil }
func (s *Server) enroll(tc *net.TCPConn) bool { return false }
func (s *Server) stopLoops()                  {}
func (s *Server) interruptLoops()             {}

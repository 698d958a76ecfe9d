// Package pprofsrv serves net/http/pprof on a listener of its own (never
// on a server's client or metrics port), for `redlock bench --pprof-addr`
// and `redlock proxy --pprof-addr`.
package pprofsrv

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Server serves /debug/pprof/ until Close.
type Server struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Start listens on addr (host:port; port 0 picks one) and serves the
// pprof handlers there.
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	// No /debug/pprof/cmdline: the command line carries the passwords given
	// as flags (--requirepass, --master-password), which ps shows only on
	// the host; the pprof port may be reached from others. (Index answers
	// it "unknown profile".)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, addr: ln.Addr(), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Addr returns the address it listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops serving: requests in progress get a second to finish (a
// running CPU profile is cut), then the server is closed and its
// goroutine has ended.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	err := s.srv.Close()
	<-s.done
	return err
}

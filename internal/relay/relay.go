// Package relay is a TCP relay for tests: a second address for a server
// (two names for one master), and the place to inject faults on the path.
package relay

import (
	"io"
	"net"
	"sync"
)

// Relay forwards every connection accepted on its loopback address to a
// target. Close it when done.
type Relay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{} // guarded by mu
	closed bool                  // guarded by mu
}

// Start listens on a free 127.0.0.1 port and relays to target.
func Start(target string) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr returns the relay's address.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		t, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		if !r.track(c, t) {
			return
		}
		r.wg.Add(2)
		go r.pipe(c, t)
		go r.pipe(t, c)
	}
}

func (r *Relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *Relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// Close stops accepting, closes every relayed connection and waits for the
// relay's goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}

// Package netgate lets a test hold the writes of the TCP connections a
// client dials, so that it can queue requests behind a write in progress
// (for example to see them merged into the next write) deterministically.
package netgate

import (
	"context"
	"net"
	"sync"
)

// Gate is shared by every connection its Dialer dials.
type Gate struct {
	mu     sync.Mutex
	open   chan struct{} // nil: writes pass
	rec    bool          // recording: Hold was called
	writes [][]byte      // what was written since the first Hold
	inside chan struct{} // one value per write that started waiting
}

// New returns an open Gate.
func New() *Gate { return &Gate{inside: make(chan struct{}, 1024)} }

// Dialer is a TCP dialer (for conn.Config.Dialer) whose connections
// pass their writes through g.
func (g *Gate) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &gatedConn{Conn: nc, g: g}, nil
	}
}

// Hold makes every write from now on wait until the returned release is
// called; from the first Hold on, writes are recorded (see Writes).
func (g *Gate) Hold() (release func()) {
	open := make(chan struct{})
	g.mu.Lock()
	g.open, g.rec = open, true
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		if g.open == open {
			g.open = nil
		}
		g.mu.Unlock()
		close(open)
	}
}

// WaitInside waits until n writes are waiting (or have waited) at the gate
// since the Gate was made.
func (g *Gate) WaitInside(n int) {
	for range n {
		<-g.inside
	}
}

// Writes returns the writes made since the first Hold, in order.
func (g *Gate) Writes() [][]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]byte(nil), g.writes...)
}

type gatedConn struct {
	net.Conn
	g *Gate
}

func (c *gatedConn) Write(b []byte) (int, error) {
	g := c.g
	g.mu.Lock()
	open := g.open
	if g.rec {
		g.writes = append(g.writes, append([]byte(nil), b...))
	}
	g.mu.Unlock()
	if open != nil {
		g.inside <- struct{}{}
		<-open
	}
	return c.Conn.Write(b)
}

// Package relay is a TCP relay for tests: a second address for a server
// (two names for one master), and the place to inject faults on the path.
package relay

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"
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
	held   chan struct{}         // closed by Release; nil: not held; guarded by mu
	// waiting: the chunks toward the target Hold keeps now; guarded by mu
	waiting map[*chunk]struct{}
	done    chan struct{} // closed by Close
	delay   atomic.Int64  // added one-way latency, ns
}

// SetDelay adds d of latency to every byte relayed from now on, in each
// direction (0 removes it). Order and content are preserved.
func (r *Relay) SetDelay(d time.Duration) { r.delay.Store(int64(d)) }

// Hold stops forwarding what clients send toward the target, on every
// connection (new ones too), until [Relay.Release]: requests wait in the
// relay, in order, while replies to what already passed still come back.
// A test can thus let one command reach the server and keep the next one
// on the wire for as long as it likes. Holding a held Relay does nothing.
func (r *Relay) Hold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = make(chan struct{})
	}
}

// Release forwards what Hold kept, in order, and stops holding.
func (r *Relay) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held != nil {
		close(r.held)
		r.held = nil
	}
}

// gate returns the channel a chunk toward the target waits on (nil: pass).
func (r *Relay) gate() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// Holding reports whether a chunk that Hold keeps from the target
// contains sub: a test waits with it for a request to be on the wire.
// (A client's batch is one chunk unless it is larger than 64 KiB.)
func (r *Relay) Holding(sub []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.waiting {
		if bytes.Contains(c.data, sub) {
			return true
		}
	}
	return false
}

// Start listens on a free 127.0.0.1 port and relays to target.
func Start(target string) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
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
		go r.pipe(c, t, false)
		go r.pipe(t, c, true)
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

// chunk is bytes read at one instant, due for writing at another.
type chunk struct {
	due  time.Time
	data []byte
}

// pipe copies src to dst; up: toward the target (what Hold holds).
func (r *Relay) pipe(dst, src net.Conn, up bool) {
	defer r.wg.Done()
	defer src.Close()
	defer dst.Close()
	// The reader stamps each chunk with its due time; the writer holds it
	// until then. A full queue stops the reader (backpressure).
	q := make(chan chunk, 256)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(q)
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{due: time.Now().Add(time.Duration(r.delay.Load())), data: append([]byte(nil), buf[:n]...)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		if h := r.gate(); up && h != nil {
			r.mu.Lock()
			if r.waiting == nil {
				r.waiting = make(map[*chunk]struct{})
			}
			r.waiting[&c] = struct{}{}
			r.mu.Unlock()
			select {
			case <-h:
			case <-r.done:
				src.Close()
				for range q {
				}
				return
			}
			r.mu.Lock()
			delete(r.waiting, &c)
			r.mu.Unlock()
		}
		if _, err := dst.Write(c.data); err != nil {
			src.Close() // unblocks the reader; drain what it queued
			for range q {
			}
			return
		}
	}
}

// Close stops accepting, closes every relayed connection and waits for the
// relay's goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	if !r.closed {
		close(r.done)
	}
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}

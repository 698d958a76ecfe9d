package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
)

// Defaults of [Config]; a zero field selects them.
const (
	DefaultListen          = "127.0.0.1:7380"
	DefaultMaxClients      = 10000
	DefaultMaxRequestBytes = 4 << 20         // bytes of one pending request
	DefaultCommandTimeout  = 5 * time.Second // safety net; engine operations end by their per-master timeouts
	DefaultMaxPipeline     = 1024            // commands in flight per connection
	DefaultMaxScripts      = 1024            // non-library scripts remembered for EVALSHA
	DefaultCleanupTimeout  = 100 * time.Millisecond
)

// Config configures a [Server]. Either Addrs or Engine is required.
type Config struct {
	// Addrs are the masters' host:port; the server creates (and closes) its
	// own engine for them.
	Addrs []string
	// Conn configures the engine's master connections (AUTH, TLS...) when
	// Addrs is used.
	Conn conn.Config
	// Engine, if set, is used instead of Addrs and is not closed by the server.
	Engine *engine.Engine
	// Listen is the address ListenAndServe listens on (default [DefaultListen]).
	Listen string
	// RequirePass, if set, makes clients AUTH (or HELLO ... AUTH) first.
	RequirePass string
	// MaxClients bounds concurrent client connections (default [DefaultMaxClients]);
	// the next one gets "-ERR max number of clients reached" and is closed.
	MaxClients int
	// MaxRequestBytes bounds the bytes of one pending (incomplete) request
	// (default [DefaultMaxRequestBytes]); above it the client gets a
	// protocol error and is closed.
	MaxRequestBytes int
	// IdleTimeout closes connections idle this long (0: never).
	IdleTimeout time.Duration
	// MaxPipeline bounds commands in flight per connection (default
	// [DefaultMaxPipeline]); the server stops reading that client above it.
	MaxPipeline int
	// MaxScripts bounds remembered non-library scripts (default [DefaultMaxScripts]).
	MaxScripts int
	// MasterTimeout is the per-master timeout (0: max(5ms, min(50ms,
	// ttl/100)) like the engine; 50ms for reads). With Addrs it is also the
	// engine's Config.MasterTimeout.
	MasterTimeout time.Duration
	// DriftFactor and DriftMin define the clock drift allowance (defaults
	// [engine.DefaultDriftFactor], [engine.DefaultDriftMin]) of the engine
	// the proxy creates; every acquisition, SET or script, uses the engine's
	// allowance ([engine.Engine.Drift]). Ignored when Engine is set.
	DriftFactor float64
	DriftMin    time.Duration
	// CleanupTimeout bounds the release after a failed script acquisition
	// (default 100ms).
	CleanupTimeout time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Engine == nil && len(c.Addrs) == 0 {
		return c, fmt.Errorf("%w: no masters (Addrs or Engine)", ErrBadConfig)
	}
	if c.MaxClients < 0 || c.MaxRequestBytes < 0 || c.IdleTimeout < 0 ||
		c.MaxPipeline < 0 || c.MaxScripts < 0 || c.MasterTimeout < 0 || c.DriftFactor < 0 ||
		c.DriftFactor >= 1 || c.DriftMin < 0 || c.CleanupTimeout < 0 {
		return c, fmt.Errorf("%w: negative or out-of-range value", ErrBadConfig)
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxPipeline == 0 {
		c.MaxPipeline = DefaultMaxPipeline
	}
	if c.MaxScripts == 0 {
		c.MaxScripts = DefaultMaxScripts
	}
	if c.DriftFactor == 0 {
		c.DriftFactor = engine.DefaultDriftFactor
	}
	if c.DriftMin == 0 {
		c.DriftMin = engine.DefaultDriftMin
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = DefaultCleanupTimeout
	}
	return c, nil
}

// Server is a RESP server that turns lock commands of unmodified Redis
// clients into Redlock quorum operations. Create it with [New].
type Server struct {
	cfg       Config
	eng       *engine.Engine
	ownEngine bool
	scripts   scriptCache
	start     time.Time

	baseCtx context.Context // cancelled by Close
	cancel  context.CancelFunc

	shutting atomic.Bool
	nextID   atomic.Int64
	clients  atomic.Int64
	wg       sync.WaitGroup // serve loops and client goroutines
	close    sync.Once

	mu        sync.Mutex
	listeners map[net.Listener]struct{} // guarded by mu
	conns     map[*client]struct{}      // guarded by mu
	addr      net.Addr                  // guarded by mu: first listener's address

	// Counters for INFO.
	accepted, rejected, commands, protoErrors atomic.Uint64
}

// New validates cfg and returns a Server; with Addrs it starts an engine
// that connects to the masters in the background.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, eng: cfg.Engine, start: time.Now(),
		listeners: map[net.Listener]struct{}{}, conns: map[*client]struct{}{}}
	s.scripts = scriptCache{max: cfg.MaxScripts, m: map[string]*conn.Script{}}
	if s.eng == nil {
		s.eng, err = engine.New(engine.Config{Addrs: cfg.Addrs, Conn: cfg.Conn, MasterTimeout: cfg.MasterTimeout,
			DriftFactor: cfg.DriftFactor, DriftMin: cfg.DriftMin, CleanupTimeout: cfg.CleanupTimeout})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
		s.ownEngine = true
	}
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Engine returns the engine the server drives.
func (s *Server) Engine() *engine.Engine { return s.eng }

// Addr returns the address of the first listener, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// ListenAndServe listens on Config.Listen and serves until Shutdown or Close.
func (s *Server) ListenAndServe() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Serve accepts connections on ln until Shutdown or Close (then it returns
// [ErrServerClosed]) or ln fails. It closes ln.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shutting.Load() {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	if s.addr == nil {
		s.addr = ln.Addr()
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.shutting.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.accept(nc)
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// accept registers nc and starts its goroutine, or refuses it.
func (s *Server) accept(nc net.Conn) {
	if s.clients.Add(1) > int64(s.cfg.MaxClients) {
		s.clients.Add(-1)
		s.rejected.Add(1)
		nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		nc.Write(redcon.AppendError(nil, msgMaxClients))
		nc.Close()
		return
	}
	c := &client{s: s, nc: nc, id: s.nextID.Add(1), authed: s.cfg.RequirePass == "",
		calls: make(chan *call, s.cfg.MaxPipeline), created: time.Now()}
	s.mu.Lock()
	if s.shutting.Load() {
		s.mu.Unlock()
		s.clients.Add(-1)
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.accepted.Add(1)
	go c.serve()
}

// Shutdown stops accepting, stops reading new commands, lets in-flight
// commands finish and their replies be written, then closes every client
// connection — like http.Server.Shutdown. Locks clients hold are not
// released (they expire by their TTL or are released by their owners
// through another proxy). If ctx ends first, Shutdown calls Close and
// returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopAccepting()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.SetReadDeadline(time.Now()) // wakes the reader; it sees shutting
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return s.Close()
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

func (s *Server) stopAccepting() {
	s.mu.Lock()
	s.shutting.Store(true)
	for ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
}

// Close stops the server at once: listeners and client connections are
// closed, in-flight commands are cancelled (an acquisition cancelled this
// way is released by the engine), every goroutine is waited for, and an
// engine the server created is closed. Idempotent.
func (s *Server) Close() error {
	s.close.Do(func() {
		s.stopAccepting()
		s.cancel()
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
		if s.ownEngine {
			s.eng.Close()
		}
	})
	return nil
}

// client is one client connection: a reader goroutine (serve) parses and
// dispatches commands in order, a writer goroutine writes their replies in
// the same order.
type client struct {
	s       *Server
	nc      net.Conn
	id      int64
	created time.Time
	calls   chan *call // dispatched commands in request order; closed by the reader

	// Owned by the reader goroutine (commands that change them run there):
	authed    bool
	name      string
	lib       string
	lastByKey map[string]*call // last in-flight command per key
}

// call is one command's reply slot.
type call struct {
	done       chan struct{} // closed when out is final
	out        []byte
	closeAfter bool // QUIT / protocol error: close after writing
	flushAfter bool // last command of a read batch: flush after writing
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *client) serve() {
	s := c.s
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.clients.Add(-1)
		s.wg.Done()
	}()
	var wdone sync.WaitGroup
	wdone.Add(1)
	go func() { defer wdone.Done(); c.writeLoop() }()
	c.readLoop()
	close(c.calls)
	wdone.Wait()
	c.nc.Close()
}

// limitReader counts the bytes read since the last complete batch.
type limitReader struct {
	nc      net.Conn
	pending int
	max     int
}

func (r *limitReader) Read(p []byte) (int, error) {
	n, err := r.nc.Read(p)
	r.pending += n
	if r.pending > r.max {
		return n, errRequestTooLarge
	}
	return n, err
}

func (c *client) readLoop() {
	s := c.s
	lr := &limitReader{nc: c.nc, max: s.cfg.MaxRequestBytes}
	rd := redcon.NewReader(lr)
	for {
		if s.cfg.IdleTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		}
		if s.shutting.Load() {
			return
		}
		cmds, err := rd.ReadCommands()
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.As(err, &ne):
			case errors.Is(err, errRequestTooLarge):
				s.protoErrors.Add(1)
				c.push(&call{done: closedChan, out: redcon.AppendError(nil, "ERR Protocol error: request larger than max-request-bytes"), closeAfter: true})
			default: // redcon's protocol errors ("Protocol error: ...")
				s.protoErrors.Add(1)
				c.push(&call{done: closedChan, out: redcon.AppendError(nil, "ERR "+err.Error()), closeAfter: true})
			}
			return
		}
		lr.pending = 0
		for i, cmd := range cmds {
			if len(cmd.Raw) > s.cfg.MaxRequestBytes {
				s.protoErrors.Add(1)
				c.push(&call{done: closedChan, out: redcon.AppendError(nil, "ERR Protocol error: request larger than max-request-bytes"), closeAfter: true})
				return
			}
			s.commands.Add(1)
			cl := c.dispatch(cmd.Args)
			cl.flushAfter = i == len(cmds)-1
			c.push(cl)
			if cl.closeAfter {
				return
			}
		}
	}
}

func (c *client) push(cl *call) { c.calls <- cl }

// writeLoop writes replies in request order, with one write per read
// batch: it flushes after the reply to the last command of each batch the
// reader got from the socket (a pipeline), once every reply of the batch is
// ready.
func (c *client) writeLoop() {
	var buf []byte
	broken := false
	flush := func() {
		if len(buf) == 0 || broken {
			buf = buf[:0]
			return
		}
		c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.nc.Write(buf); err != nil {
			broken = true
			c.nc.Close() // unblocks the reader
		}
		if cap(buf) > 64<<10 {
			buf = nil
		} else {
			buf = buf[:0]
		}
	}
	for cl := range c.calls {
		<-cl.done
		if !broken {
			buf = append(buf, cl.out...)
		}
		if cl.flushAfter || cl.closeAfter {
			flush()
		}
		if cl.closeAfter {
			broken = true
			c.nc.Close()
		}
	}
	flush()
}

package respserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// Config configures a [Server]: the limits of its clients, and what the
// handler behind it gives it (Commands and the hooks). Zero limits are
// not defaults here: the proxy's Config sets them (proxy.New).
type Config struct {
	// RequirePass, MaxAuthFailures, AuthTimeout, RequestTimeout,
	// MaxClients, MaxRequestBytes, MaxArgs, MaxPipeline, MaxInFlight,
	// QueueTimeout, MaxClientMemory, IdleTimeout, KeyPrefix, EventLoops,
	// Logger: as proxy.Config documents them (EventLoops: 0 runs none).
	RequirePass     string
	MaxAuthFailures int
	AuthTimeout     time.Duration
	RequestTimeout  time.Duration
	MaxClients      int
	MaxRequestBytes int
	MaxArgs         int
	MaxPipeline     int
	MaxInFlight     int
	QueueTimeout    time.Duration
	MaxClientMemory int
	IdleTimeout     time.Duration
	KeyPrefix       string
	EventLoops      int
	Logger          *slog.Logger
	// WriteTimeout bounds one write of replies to a client (a client that
	// does not read for this long, up to a second longer, is closed).
	WriteTimeout time.Duration

	// What the handler gives the server.

	// Commands are the handler's commands, served beside the server's own
	// (connection plumbing and pub/sub: [ServerCommands]).
	Commands []*Command
	// CheckKey, if set, is asked of every key argument of a command
	// before it runs (after KeyPrefix): a non-nil Call is the reply
	// instead (the lock commands refuse the keys they keep beside locks).
	CheckKey func(key []byte) *Call
	// Subscribable says which channels a client may SUBSCRIBE to, and
	// SubscribableWhat names them in a refusal.
	Subscribable     func(ch string) bool
	SubscribableWhat string
	// LatencyTarget is the admission's target for a command's time on the
	// backends ([Admission]).
	LatencyTarget time.Duration
	// Corks are held back while an event loop dispatches a turn's
	// commands, and let go at its end: the backends' connections, so that
	// a turn's commands go out in one write each.
	Corks []Cork
	// ClosedReply is the reply to a command admitted after Close began
	// (it never started).
	ClosedReply func(err error) []byte
	// CloseWait bounds how long Close waits for the commands in flight
	// before it closes the connections of clients that do not read.
	CloseWait time.Duration
	// InfoSections are the handler's INFO sections, after the server's
	// (server, clients, replication, persistence, cpu, proxy). Info
	// appends to b the handler's lines of a section: for one of the
	// server's, lines after the server's own (the lock commands add their
	// counters to "proxy"); for one of InfoSections, the whole section,
	// header included.
	InfoSections []string
	Info         func(b []byte, section string) []byte
}

// Cork is what an event loop holds back during a turn: a connection
// whose writer waits until Uncork (conn.Conn).
type Cork interface {
	Cork()
	Uncork()
}

// ErrServerClosed is returned by [Server.Serve] after [Server.Shutdown] or
// [Server.Close].
var ErrServerClosed = errors.New("proxy: server closed")

// ErrConfig is matched by the errors of [New] for a Config it cannot
// serve (a command table with a name twice, a pool size the pool
// refuses, event loops where there is no epoll). Its other errors (an
// event loop that could not start: file descriptors) are the system's.
var ErrConfig = errors.New("respserver: invalid config")

// Server serves RESP clients: on event loops or two goroutines per
// connection, within the limits of its Config, dispatching their commands
// to the handler's table. Create it with [New].
type Server struct {
	cfg      Config
	table    *commandTable
	start    time.Time
	log      *slog.Logger
	inflight chan struct{}     // semaphore: commands running on the backends
	workers  *Workers[*Call]   // runs asynchronous commands (pool.go)
	adm      *Admission[*Call] // admission.go
	subs     subscriptions     // what clients may subscribe to
	hub      Hub[*Conn]        // subscriptions (pubsub.go)

	baseCtx context.Context // cancelled by Close
	cancel  context.CancelFunc

	shutting atomic.Bool
	nextID   atomic.Int64
	clients  atomic.Int64
	mem      atomic.Int64   // bytes charged to MaxClientMemory
	wg       sync.WaitGroup // serve loops and client goroutines
	close    sync.Once

	mu        sync.Mutex
	listeners map[net.Listener]struct{} // guarded by mu
	conns     map[*Conn]struct{}        // guarded by mu
	addr      net.Addr                  // guarded by mu: first listener's address

	// Counters for INFO and Stats.
	accepted, rejected, commands, protoErrors atomic.Uint64

	panics, authFailures, memRefused atomic.Uint64
	overloaded                       atomic.Uint64 // requests refused -BUSY (admission)
	expiredReplies                   atomic.Uint64 // grants answered MsgExpired (Call.reply)
	wakesSent, wakeDropped           atomic.Uint64 // messages delivered, and lost to full queues

	loops       []*loop        // event loops (Config.EventLoops)
	loopWG      sync.WaitGroup // the loops' goroutines
	loopMoves   atomic.Uint64  // clients moved from a loop to goroutines
	loopClients atomic.Int64   // clients on the loops now

	// Log budgets (LogBurst lines per LogWindow each): what clients cause
	// (any client, authenticated or not, can spend it), and the backends'
	// failures behind clients' error replies ([Server.LogBackend]), which
	// clients must not be able to crowd out.
	clientLog, masterLog LogBudget
}

// New returns a Server of cfg: its worker pool and event loops are
// running; it serves once [Server.Serve] is called.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = writeTimeout
	}
	if cfg.EventLoops > 0 && !LoopsSupported {
		return nil, fmt.Errorf("%w: EventLoops needs Linux (epoll)", ErrConfig)
	}
	table, err := newCommandTable(cfg.Commands)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s := &Server{cfg: cfg, table: table, start: time.Now(), log: cfg.Logger,
		inflight:  make(chan struct{}, cfg.MaxInFlight),
		listeners: map[net.Listener]struct{}{}, conns: map[*Conn]struct{}{}}
	s.subs = subscriptions{allowed: cfg.Subscribable, what: cfg.SubscribableWhat}
	if s.subs.allowed == nil {
		s.subs.allowed = func(string) bool { return false }
	}
	s.adm = NewAdmission(cfg.LatencyTarget, cfg.QueueTimeout, cfg.MaxInFlight, callArrived)
	if err := s.startPool(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := s.startLoops(); err != nil {
		s.workers.Release()
		return nil, err
	}
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// DefaultEventLoops is the number of event loops of a default
// configuration: one per four CPUs, at least one, on Linux; none
// elsewhere (tests may replace it).
var DefaultEventLoops = func() int {
	if !LoopsSupported {
		return 0
	}
	return max(1, runtime.GOMAXPROCS(0)/4)
}

// Addr returns the address of the first listener, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Closing is true from the start of Shutdown or Close.
func (s *Server) Closing() *atomic.Bool { return &s.shutting }

// Publish sends msg on ch to every subscriber and returns how many got
// it (the hub queues under its lock: see [Hub.Publish]).
func (s *Server) Publish(ch, msg string) int {
	n, dropped := s.hub.Publish(ch, msg)
	s.wakeDropped.Add(uint64(dropped))
	s.wakesSent.Add(uint64(n))
	return n
}

// LogBackend logs a backend's failure behind a client's error reply, at
// most LogBurst lines per LogWindow on a budget clients cannot spend.
func (s *Server) LogBackend(msg string, attrs ...any) { s.masterLog.Warn(s.log, msg, attrs) }

// LogClient logs what a client caused, on the clients' budget.
func (s *Server) LogClient(msg string, attrs ...any) { s.clientLog.Warn(s.log, msg, attrs) }

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
		if _, ok := nc.(*tls.Conn); ok {
			// The write runs the TLS handshake, which waits for the
			// client: not on the accept loop, and bounded.
			go func() {
				nc.SetDeadline(time.Now().Add(time.Second))
				nc.Write(redcon.AppendError(nil, msgMaxClients))
				nc.Close()
			}()
			return
		}
		nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		nc.Write(redcon.AppendError(nil, msgMaxClients))
		nc.Close()
		return
	}
	if tc, ok := nc.(*net.TCPConn); ok && s.enroll(tc) {
		return
	}
	c := newClient(s, nc, nc.RemoteAddr().String())
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
	done := s.interrupt()
	select {
	case <-done:
		return s.Close()
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

// interrupt wakes every connection's reader, which sees Shutdown, and
// returns a channel closed once every connection and Serve ended.
func (s *Server) interrupt() <-chan struct{} {
	s.mu.Lock()
	for c := range s.conns {
		c.interrupt()
	}
	s.mu.Unlock()
	s.interruptLoops()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	return done
}

func (s *Server) stopAccepting() {
	s.mu.Lock()
	s.shutting.Store(true)
	for ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
}

// Close stops the server: listeners are closed, clients are not read
// again, in-flight commands are cancelled (their context ends), client
// connections are closed once those commands ended — at most
// Config.CloseWait later —, and every goroutine is waited for.
// Idempotent.
func (s *Server) Close() error {
	s.close.Do(func() {
		s.stopAccepting()
		s.cancel()
		done := s.interrupt()
		bound := time.NewTimer(s.cfg.CloseWait)
		select {
		case <-done:
		case <-bound.C: // a client that does not read its replies
		}
		bound.Stop()
		s.mu.Lock()
		for c := range s.conns {
			c.forceClose()
		}
		s.mu.Unlock()
		<-done
		s.stopLoops()
		s.workers.Release()
	})
	return nil
}

// logLimited logs a warning about a client, at most LogBurst
// per LogWindow: a hostile client must not flood the log. The
// first line of the next window says how many were left out.
func (s *Server) logLimited(msg string, attrs ...any) { s.clientLog.Warn(s.log, msg, attrs) }

package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// Defaults of [Config]; a zero field selects them.
const (
	DefaultListen          = "127.0.0.1:7380"
	DefaultMaxClients      = 10000
	DefaultMaxRequestBytes = 1 << 20          // bytes of one request's arguments
	DefaultMaxArgs         = 1024             // arguments of one request
	DefaultMaxPipeline     = 1024             // unanswered commands per connection
	DefaultMaxInFlight     = 10000            // commands running on the masters, all clients together
	DefaultMaxClientMemory = 128 << 20        // bytes of requests and replies held for all clients
	DefaultMaxScripts      = 1024             // opted-in scripts remembered for EVALSHA
	DefaultMaxAuthFailures = 5                // wrong passwords before a connection is closed
	DefaultAuthTimeout     = 10 * time.Second // to authenticate, when a password is set
	DefaultRequestTimeout  = 10 * time.Second // to send a request, once its first byte arrived
	DefaultQueueTimeout    = time.Second      // a pipelined command's wait for the masters (admission.go)
)

// Config configures a [Server]. EngineConfig's members (Addrs, Clusters) or
// Engine are required.
type Config struct {
	// EngineConfig configures the engine the server creates (and closes) for its
	// masters: EngineConfig.Addrs, master AUTH/TLS in EngineConfig.Conn, per-master
	// timeout, drift, connections per master. Defaults and validation are
	// the engine's ([engine.Config]), but for EngineConfig.Names: its
	// errors reach the proxy's clients, who tell an operator, so settings
	// are named by `redlock proxy`'s flags ("--max-ttl") unless set.
	// Ignored when Engine is set.
	EngineConfig engine.Config
	// Engine, if set, is the engine the server drives instead of creating
	// one; the server does not close it. AllowScripts needs EngineConfig's members.
	// Its connections should load [MasterScripts] at connect
	// (engine.Config.Conn.Scripts), as the server's own engine does:
	// otherwise a cleanup answered NOSCRIPT after its timeout is dropped.
	Engine *engine.Engine
	// Listen is the address ListenAndServe listens on (default [DefaultListen]).
	Listen string
	// RequirePass, if set, makes clients AUTH (or HELLO ... AUTH) first.
	// Until then a request may have at most 10 arguments of at most 16 KiB
	// each, as Redis allows unauthenticated clients, and all of a
	// connection's requests together at most 16 KiB (none of
	// MaxClientMemory).
	RequirePass string
	// MaxAuthFailures closes a connection after that many wrong passwords
	// (default [DefaultMaxAuthFailures]).
	MaxAuthFailures int
	// AuthTimeout closes a connection that has not authenticated this long
	// after it was accepted, when RequirePass is set (default
	// [DefaultAuthTimeout]).
	AuthTimeout time.Duration
	// RequestTimeout closes a connection whose request is not complete
	// this long after its first byte arrived — a slow-loris client
	// (default [DefaultRequestTimeout]). Waiting between requests is
	// bounded by IdleTimeout instead.
	RequestTimeout time.Duration
	// MaxClients bounds concurrent client connections (default [DefaultMaxClients]);
	// the next one gets "-ERR max number of clients reached" and is closed.
	MaxClients int
	// MaxRequestBytes bounds the arguments of one request in bytes (default
	// [DefaultMaxRequestBytes]); an inline request is also bounded by 64 KiB.
	// Above it the client gets "-ERR Protocol error: ..." and is closed.
	MaxRequestBytes int
	// MaxArgs bounds the arguments of one request (default [DefaultMaxArgs]).
	MaxArgs int
	// MaxPipeline bounds the commands of one connection that are read but
	// not answered yet (default [DefaultMaxPipeline]); above it, and while
	// the connection holds more than MaxRequestBytes of unanswered requests
	// and unwritten replies, the server stops reading that client.
	MaxPipeline int
	// MaxInFlight bounds the commands running on the masters or waiting
	// for them, for all clients together (default [DefaultMaxInFlight]);
	// above it readers wait.
	MaxInFlight int
	// QueueTimeout bounds how long a pipelined client's command waits in
	// the proxy for its turn on the masters (default
	// [DefaultQueueTimeout]). The proxy limits the commands on the masters
	// at once, adaptively, so that they complete within the per-master
	// timeout even when it is overloaded; a command that would wait
	// longer than QueueTimeout is answered at once with "-BUSY redlock
	// proxy: overloaded: ...", without reaching the masters.
	QueueTimeout time.Duration
	// MaxClientMemory bounds the bytes of requests and replies the server
	// holds for all clients (default [DefaultMaxClientMemory]); each
	// connection's first 16 KiB are not counted. A client whose request
	// would go over it gets "-ERR ... client memory limit reached" and is
	// closed.
	MaxClientMemory int
	// IdleTimeout closes connections idle this long (0: never).
	IdleTimeout time.Duration
	// AllowScripts runs scripts that are not recognised lock scripts on
	// every master (EVAL, EVALSHA, SCRIPT LOAD). It gives every client
	// full write access to every master. Off by default: such scripts get
	// an error and reach no master.
	AllowScripts bool
	// AllowTokenlessWrites serves DEL and PEXPIRE, which delete or shorten
	// a lock without checking its token: a client whose lock expired and
	// was taken by another would delete or shorten the other's lock (the
	// mistake Redlock's compare-and-delete release exists to prevent).
	// Off by default: they get an error naming the release and extend
	// scripts. Turn it on for clients that release with DEL.
	AllowTokenlessWrites bool
	// ScriptTimeout is the per-master timeout of opted-in scripts (default:
	// the engine's per-master timeout for reads, 50ms unless
	// EngineConfig.MasterTimeout is set).
	ScriptTimeout time.Duration
	// MaxScripts bounds remembered opted-in scripts (default [DefaultMaxScripts]).
	MaxScripts int
	// KeyPrefix is prepended to every key a client names (in key
	// arguments and in the keys of scripts) before it reaches the masters,
	// so that tenants whose proxies use different prefixes share masters
	// without seeing or touching each other's locks. The engine's own
	// Config.KeyPrefix must then be empty.
	KeyPrefix string
	// WakeChannel is the channel on the masters over which proxies on the
	// same masters wake each other's Redisson waiters when a hold ends
	// (default [DefaultWakeChannel]); proxies that serve the same clients
	// must use the same channel. With a master ACL user the proxy needs
	// PUBLISH and SUBSCRIBE on it.
	WakeChannel string
	// LocalWakeups keeps wake-ups inside this proxy: no subscription to
	// WakeChannel, no publication on the masters. A waiter subscribed
	// through another proxy then retries at the lock's TTL.
	LocalWakeups bool
	// EventLoops is the number of event loops (epoll) that serve
	// plain-TCP clients, instead of two goroutines per client: one
	// readiness wait serves every ready client, the commands of a turn go
	// to each master in one write, and each client's replies in one write
	// per turn. TLS clients, and a client that subscribes or sends a
	// request larger than 16 KiB, are served by goroutines. 0: the default
	// (one per four CPUs, at least one, on Linux; none elsewhere);
	// negative: none, goroutines for every client.
	EventLoops int
	// Logger receives the server's events (panics, refused clients);
	// nil discards them. Passwords are never logged.
	Logger *slog.Logger

	// writeTimeout replaces the server room's 10 s write timeout (0: that
	// default; tests: a client that does not read is closed sooner).
	writeTimeout time.Duration
}

func (c Config) withDefaults() (Config, error) {
	members := len(c.EngineConfig.Addrs) + len(c.EngineConfig.Clusters)
	if c.Engine == nil && members == 0 {
		return c, fmt.Errorf("%w: no masters (EngineConfig.Addrs, EngineConfig.Clusters or Engine)", ErrBadConfig)
	}
	if c.EngineConfig.KeyPrefix != "" || (c.Engine != nil && c.Engine.Config().KeyPrefix != "") {
		return c, fmt.Errorf("%w: set the proxy's KeyPrefix, not the engine's", ErrBadConfig)
	}
	if c.AllowScripts && members == 0 {
		return c, fmt.Errorf("%w: AllowScripts needs EngineConfig's members for its own master connections", ErrBadConfig)
	}
	for _, v := range []struct {
		p    *int
		def  int
		name string
	}{
		{&c.MaxClients, DefaultMaxClients, "MaxClients"},
		{&c.MaxRequestBytes, DefaultMaxRequestBytes, "MaxRequestBytes"},
		{&c.MaxArgs, DefaultMaxArgs, "MaxArgs"},
		{&c.MaxPipeline, DefaultMaxPipeline, "MaxPipeline"},
		{&c.MaxInFlight, DefaultMaxInFlight, "MaxInFlight"},
		{&c.MaxClientMemory, DefaultMaxClientMemory, "MaxClientMemory"},
		{&c.MaxScripts, DefaultMaxScripts, "MaxScripts"},
		{&c.MaxAuthFailures, DefaultMaxAuthFailures, "MaxAuthFailures"},
	} {
		if *v.p < 0 {
			return c, fmt.Errorf("%w: negative %s", ErrBadConfig, v.name)
		}
		if *v.p == 0 {
			*v.p = v.def
		}
	}
	if c.EventLoops == 0 {
		c.EventLoops = respserver.DefaultEventLoops()
	}
	if c.EventLoops < 0 {
		c.EventLoops = 0
	}
	if c.EventLoops > 0 && !respserver.LoopsSupported {
		return c, fmt.Errorf("%w: EventLoops needs Linux (epoll)", ErrBadConfig)
	}
	if c.IdleTimeout < 0 || c.ScriptTimeout < 0 || c.AuthTimeout < 0 || c.RequestTimeout < 0 || c.QueueTimeout < 0 {
		return c, fmt.Errorf("%w: negative timeout", ErrBadConfig)
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.QueueTimeout == 0 {
		c.QueueTimeout = DefaultQueueTimeout
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.WakeChannel == "" {
		c.WakeChannel = DefaultWakeChannel
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Server is a RESP server that turns lock commands of unmodified Redis
// clients into Redlock quorum operations. Create it with [New].
//
// It is the wiring of the proxy's rooms: the RESP server
// (proxy/internal/respserver) serves the clients' connections and
// dispatches their commands to the lock commands
// (proxy/internal/lockcmds), which run them over the engine and hand
// Redisson's scripts to the Redisson room (proxy/internal/redisson).
type Server struct {
	cfg       Config
	rs        *respserver.Server // the clients' connections
	lc        *lockcmds.Commands // the lock commands
	eng       *engine.Engine
	ownEngine bool
	pass      *engine.Engine // opted-in scripts' own master connections (nil unless AllowScripts)
	closed    sync.Once
}

// The server room serves the lock commands what they declare they need.
var _ lockcmds.Server = (*respserver.Server)(nil)

// New validates cfg and returns a Server; with Engine.Addrs it starts an
// engine that connects to the masters in the background.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, eng: cfg.Engine}
	if s.eng == nil {
		ec := cfg.EngineConfig
		for _, n := range []struct {
			f    *string
			flag string
		}{
			{&ec.Names.MaxTTL, "--max-ttl"}, {&ec.Names.FreshMasters, "--fresh-masters"}, {&ec.Names.MasterTimeout, "--master-timeout"},
		} {
			if *n.f == "" {
				*n.f = n.flag
			}
		}
		ec.Conn.Scripts = append(append([]*conn.Script(nil), ec.Conn.Scripts...), lockcmds.MasterScripts()...)
		if s.eng, err = engine.New(ec); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
		s.ownEngine = true
	}
	if cfg.AllowScripts {
		// Opted-in scripts never share a connection with lock traffic:
		// their replies, stalls and timeouts stay on connections of their own.
		if s.pass, err = engine.New(cfg.EngineConfig); err != nil {
			s.closeEngines()
			return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
	}
	s.lc = lockcmds.New(lockcmds.Config{
		Engine: s.eng, Scripts: s.pass,
		AllowScripts: cfg.AllowScripts, AllowTokenlessWrites: cfg.AllowTokenlessWrites,
		ScriptTimeout: cfg.ScriptTimeout, MaxScripts: cfg.MaxScripts, KeyPrefix: cfg.KeyPrefix,
		WakeChannel: cfg.WakeChannel, LocalWakeups: cfg.LocalWakeups,
	})
	s.rs, err = respserver.New(respserver.Config{
		RequirePass: cfg.RequirePass, MaxAuthFailures: cfg.MaxAuthFailures,
		AuthTimeout: cfg.AuthTimeout, RequestTimeout: cfg.RequestTimeout,
		MaxClients: cfg.MaxClients, MaxRequestBytes: cfg.MaxRequestBytes, MaxArgs: cfg.MaxArgs,
		MaxPipeline: cfg.MaxPipeline, MaxInFlight: cfg.MaxInFlight, QueueTimeout: cfg.QueueTimeout,
		MaxClientMemory: cfg.MaxClientMemory, IdleTimeout: cfg.IdleTimeout, KeyPrefix: cfg.KeyPrefix,
		EventLoops: cfg.EventLoops, Logger: cfg.Logger, WriteTimeout: cfg.writeTimeout,

		Commands: s.lc.Table(), CheckKey: s.lc.CheckKey,
		Subscribable: lockcmds.Subscribable, SubscribableWhat: lockcmds.SubscribableWhat,
		LatencyTarget: s.lc.LatencyTarget(), Corks: s.lc.Corks(),
		ClosedReply: s.lc.EngineErr, CloseWait: s.lc.CloseWait(),
		InfoSections: lockcmds.InfoSections, Info: s.lc.Info,
	})
	if err != nil {
		s.closeEngines()
		if errors.Is(err, respserver.ErrConfig) {
			return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
		return nil, err // an event loop that could not start (file descriptors)
	}
	s.lc.Start(s.rs)
	return s, nil
}

// Engine returns the engine the server drives.
func (s *Server) Engine() *engine.Engine { return s.eng }

// Addr returns the address of the first listener, or nil before Serve.
func (s *Server) Addr() net.Addr { return s.rs.Addr() }

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
func (s *Server) Serve(ln net.Listener) error { return s.rs.Serve(ln) }

// Shutdown stops accepting, stops reading new commands, lets in-flight
// commands finish and their replies be written, then closes every client
// connection — like http.Server.Shutdown. Locks clients hold are not
// released (they expire by their TTL or are released by their owners
// through another proxy). If ctx ends first, Shutdown calls Close and
// returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.rs.Shutdown(ctx)
	s.Close()
	return err
}

// Close stops the server: listeners are closed, clients are not read
// again, in-flight commands are cancelled (an acquisition cancelled this
// way is released), client connections are closed once those commands
// ended — at most a per-master timeout and a cleanup timeout later —,
// every goroutine is waited for, and the engines the server created are
// closed. Idempotent.
//
// The wait is for the grant rule's (d): a failed library acquisition's
// cleanup deletes by the client's value where the attempt created the
// key; a client that saw its connection close before that cleanup ran
// could retry the same value through another proxy, and the late cleanup
// would delete the retry's grant.
func (s *Server) Close() error {
	s.closed.Do(func() {
		s.rs.Close()
		s.closeEngines()
	})
	return nil
}

func (s *Server) closeEngines() {
	if s.lc != nil {
		s.lc.Close()
	}
	if s.ownEngine {
		s.eng.Close()
	}
	if s.pass != nil {
		s.pass.Close()
	}
}

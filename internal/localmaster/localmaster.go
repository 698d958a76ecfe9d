// Package localmaster starts and controls N local Redis masters for tests,
// benchmarks and the redlock CLI.
//
// Real masters are redis-server child processes listening on free loopback
// ports, with persistence disabled. When redis-server is not available (or
// Options.Embedded is set) the masters are in-process miniredis servers:
// they speak the commands Redlock needs (SET NX PX, EVAL, EVALSHA, SCRIPT
// LOAD) and expire keys in real time, but cannot be paused and give
// performance numbers that say nothing about a real deployment.
//
// Masters can be secured (Options.Password, Options.TLS) the way a
// production deployment would be; secured masters are always real
// redis-server processes: embedded masters support neither.
package localmaster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"sync"

	"github.com/alicebob/miniredis/v2"
)

// DefaultN is the number of masters started when Options.N is zero.
const DefaultN = 5

// Options configures Start. The zero value starts DefaultN masters, using
// redis-server if it is on PATH and embedded masters otherwise.
type Options struct {
	N           int       // number of masters; default DefaultN
	Embedded    bool      // force embedded in-process masters (miniredis)
	RequireReal bool      // return ErrNoRedisServer if redis-server is not found (no fallback)
	ServerPath  string    // redis-server binary; default exec.LookPath("redis-server")
	ExtraArgs   []string  // extra redis-server arguments
	Notice      io.Writer // where the one-line embedded notice goes (default os.Stderr; io.Discard to silence)

	// Password, if set, is passed to every redis-server as --requirepass
	// (so it shows in the process list: for tests and benchmarks only),
	// and the readiness probe authenticates with it. ExtraArgs can add
	// ACL users (--user name on >pass ~* &* +@all).
	Password string
	// TLS, if set, makes every redis-server listen only on TLS (no
	// plain-text port) on the port Master.Addr reports, and require client
	// certificates signed by TLS.CAFile.
	TLS *TLSFiles
	// Net, if set, puts the masters on a network of the caller's instead
	// of this host's loopback (internal/test/netns: masters behind links a
	// test can cut).
	Net Network
	// Password, TLS and Net need real masters: with Embedded set Start
	// returns an error, and without redis-server it returns
	// ErrNoRedisServer instead of falling back to embedded masters.
}

// Network places real masters on a network other than this host's
// loopback (see Options.Net).
type Network interface {
	// Host returns the IP address master i listens on (--bind).
	Host(i int) string
	// Command returns the command master i's redis-server runs under,
	// its own path and arguments appended (for example ip netns exec
	// NAME, which execs it: the process is redis-server's own), or nil.
	Command(i int) []string
	// DialContext reaches a master's address from this process (the
	// readiness probe dials with it).
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// TLSFiles names the PEM files of TLS masters (see Options.TLS);
// internal/test/testcerts writes a matching set. Relative paths are taken from
// the current directory at Start.
type TLSFiles struct {
	CertFile string // server certificate (--tls-cert-file), valid for 127.0.0.1 under CAFile
	KeyFile  string // its private key (--tls-key-file)
	CAFile   string // CA that signed the server and client certificates (--tls-ca-cert-file)
	// ClientCertFile and ClientKeyFile are the client certificate and key
	// the readiness probe presents.
	ClientCertFile, ClientKeyFile string
}

var (
	// ErrNoRedisServer is returned by Start when real masters are required
	// but no redis-server binary can be found.
	ErrNoRedisServer = errors.New("localmaster: redis-server not found on PATH")
	// ErrUnsupported is returned by operations embedded masters cannot do.
	ErrUnsupported = errors.New("localmaster: operation not supported by embedded masters")
)

// Available reports whether redis-server is on PATH.
func Available() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// Start starts o.N masters and waits until every one answers PING. On
// error, the masters already started are shut down again. ctx bounds only
// the start-up, not the lifetime of the masters; call Set.Close for that.
func Start(ctx context.Context, o Options) (*Set, error) {
	n := o.N
	if n == 0 {
		n = DefaultN
	}
	if n < 0 {
		return nil, fmt.Errorf("localmaster: invalid number of masters %d", n)
	}
	if o.Embedded && o.RequireReal {
		return nil, errors.New("localmaster: Options.Embedded and Options.RequireReal are mutually exclusive")
	}
	secure := o.Password != "" || o.TLS != nil
	if o.Embedded && secure {
		return nil, errors.New("localmaster: Options.Password and Options.TLS need redis-server: embedded masters support neither")
	}
	if o.Embedded && o.Net != nil {
		return nil, errors.New("localmaster: Options.Net needs redis-server: embedded masters listen on loopback only")
	}
	notice := o.Notice
	if notice == nil {
		notice = os.Stderr
	}
	if o.Embedded {
		fmt.Fprintf(notice, "redlock: using embedded masters (forced): %d in-process masters (miniredis) — numbers are not representative\n", n)
		return startEmbedded(ctx, n)
	}
	path := o.ServerPath
	if path == "" {
		path = "redis-server"
	}
	bin, err := exec.LookPath(path)
	if err == nil {
		spec, err := newSpec(bin, o)
		if err != nil {
			return nil, err
		}
		return startReal(ctx, n, spec)
	}
	if o.RequireReal || o.ServerPath != "" || secure || o.Net != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoRedisServer, err)
	}
	fmt.Fprintf(notice, "redlock: redis-server not found; using %d embedded in-process masters (miniredis) — numbers are not representative\n", n)
	return startEmbedded(ctx, n)
}

// Set is a group of local masters started by Start. Its methods are safe
// for concurrent use.
type Set struct {
	masters  []*Master
	embedded bool
	dir      string // temp dir holding the masters' working dirs; "" if embedded

	closeOnce sync.Once
	closeErr  error
}

// Masters returns the masters, ordered by Index.
func (s *Set) Masters() []*Master { return slices.Clone(s.masters) }

// Addrs returns each master's "127.0.0.1:port" address (with Options.Net,
// "host:port" on that network), ordered by Index.
func (s *Set) Addrs() []string {
	addrs := make([]string, len(s.masters))
	for i, m := range s.masters {
		addrs[i] = m.Addr()
	}
	return addrs
}

// Embedded reports whether the masters are in-process miniredis servers.
func (s *Set) Embedded() bool { return s.embedded }

// At returns the master listening at addr, or nil (a cluster node found
// by its address in CLUSTER NODES or ROLE).
func (s *Set) At(addr string) *Master {
	for _, m := range s.masters {
		if m.Addr() == addr {
			return m
		}
	}
	return nil
}

// Close kills every redis-server process (or closes every embedded server),
// waits for them to exit and removes the temporary directories. After
// Close, masters cannot be restarted. Close is idempotent: later calls
// return the first call's result.
func (s *Set) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for _, m := range s.masters {
			errs = append(errs, m.close())
		}
		if s.dir != "" {
			if err := os.RemoveAll(s.dir); err != nil {
				errs = append(errs, fmt.Errorf("localmaster: remove temp dir: %w", err))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Master is one local Redis master of a Set. Its methods are safe for
// concurrent use; state-changing calls are serialised.
type Master struct {
	index    int
	embedded bool

	mu     sync.Mutex
	addr   string
	closed bool // the Set was closed; no restarts

	// real masters
	spec   *spec
	dir    string
	port   int
	cmd    *exec.Cmd
	exited chan struct{} // closed by the reaper goroutine once cmd.Wait returns
	paused bool

	// embedded masters
	mini *miniredis.Miniredis
}

// Addr returns the master's "127.0.0.1:port" address ("host:port" with
// Options.Net; a TLS port with
// Options.TLS). It stays the same across Restart.
func (m *Master) Addr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr
}

// Index returns the master's position in its Set.
func (m *Master) Index() int { return m.index }

// Running reports whether the master is up. A paused master is running.
func (m *Master) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.embedded {
		return m.mini != nil
	}
	return m.aliveLocked()
}

// PID returns the redis-server process id, or 0 if the master is embedded
// or not running.
func (m *Master) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.embedded || !m.aliveLocked() {
		return 0
	}
	return m.cmd.Process.Pid
}

// Stop shuts the master down gracefully (SIGTERM, resuming it first if
// paused) and waits for it to exit, sending SIGKILL if it has not exited
// after 5s. Embedded masters are closed. Stopping a stopped master is a
// no-op. Data is lost: there is no persistence.
func (m *Master) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.haltLocked(true)
}

// Kill sends SIGKILL and waits for the process to exit. Embedded masters are
// closed. Killing a stopped master is a no-op.
func (m *Master) Kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.haltLocked(false)
}

// Pause freezes the master with SIGSTOP: connections stay open but nothing
// is answered until Resume. Embedded masters return ErrUnsupported.
func (m *Master) Pause() error { return m.signalPause(true) }

// Resume continues a paused master with SIGCONT. Embedded masters return
// ErrUnsupported.
func (m *Master) Resume() error { return m.signalPause(false) }

// Restart stops the master if it is running and starts it again on the same
// port, waiting until it answers PING. The restarted master is empty.
func (m *Master) Restart(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("localmaster: master %d: set is closed", m.index)
	}
	if err := m.haltLocked(true); err != nil {
		return err
	}
	if m.embedded {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("localmaster: master %d: %w", m.index, err)
		}
		return m.serveEmbeddedLocked(m.addr)
	}
	return m.spawnRetryLocked(ctx, m.port, false)
}

// close shuts the master down for good; used by Set.Close.
func (m *Master) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return m.haltLocked(false)
}

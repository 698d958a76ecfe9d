package conn

// Configuration and the descriptive types a Conn reports (state changes,
// server identity, counters).

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// Config configures a [Conn]. The zero value is usable.
type Config struct {
	// DialTimeout bounds connect, TLS and handshake (default [DefaultDialTimeout]).
	DialTimeout time.Duration
	// KeepAlive is the TCP keepalive period (default [DefaultKeepAlive]; negative disables).
	KeepAlive time.Duration
	// WriteTimeout bounds one batch write (default [DefaultWriteTimeout]).
	WriteTimeout time.Duration
	// TLS, if non-nil, wraps the connection in TLS with this config.
	TLS *tls.Config
	// Username and Password are sent with AUTH on connect when Password is set.
	Username, Password string
	// DB is selected with SELECT on connect when non-zero.
	DB int
	// Scripts are loaded with SCRIPT LOAD on every connect.
	Scripts []*Script
	// DisableNative sends every script as EVALSHA, even to a server that
	// has its native command (see [Native]); the connect then does not
	// ask the server which commands it has.
	DisableNative bool
	// ReconnectMin and ReconnectMax bound the reconnect backoff (defaults
	// [DefaultReconnectMin], [DefaultReconnectMax]).
	ReconnectMin, ReconnectMax time.Duration
	// MaxPending bounds requests in flight; Do fails with [ErrOverloaded]
	// above it (default [DefaultMaxPending]).
	MaxPending int
	// StallTimeout bounds how long a master may leave a timed-out request
	// unanswered: when the oldest request in flight is still unanswered
	// StallTimeout after its deadline, the session is closed (in-flight
	// requests fail with an error matching [ErrStalled] and [ErrBroken]) and
	// the Conn reconnects; until it is back, Do fails fast with [ErrDown].
	// A stalled master (SIGSTOP, a long blocking command, a dead host
	// behind a live TCP path) then costs a bounded amount of queued work
	// instead of one entry per request until MaxPending. Default
	// [DefaultStallTimeout]; negative disables it.
	StallTimeout time.Duration
	// ReadBufferSize is the reply read buffer size in bytes (default [DefaultReadBufferSize]).
	ReadBufferSize int
	// Dialer, if set, replaces the TCP dialer (tests use it for fakes).
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// OnWrite, if set, is called on the Conn's writer goroutine after each
	// write with the number of requests it carried (auto-pipelining's
	// batch size; a merged call counts its members, see [Merge]). It must
	// be fast and not block.
	OnWrite func(commands int)
	// OnClockJump, if set, turns the clock check on: every write batch
	// starts with TIME, and each reply to it is compared with this
	// process's monotonic clock since the previous reading on the same
	// server (same run_id). When the server's clock advanced more than
	// this process's can have plus ClockAllowance of that interval — a
	// forward jump: its keys expire early —, or less than this process's
	// must have minus the allowance — a backward jump —, OnClockJump is
	// called on the reader goroutine before any reply of the batch's
	// requests is delivered. It must not block. It costs one TIME per
	// write batch (docs/benchmarks.md).
	OnClockJump func(ClockJump)
	// ClockAllowance is how far the server's clock may move from this
	// process's over an interval without counting as a jump (with
	// OnClockJump; default 2ms + 1% of the interval).
	ClockAllowance func(interval time.Duration) time.Duration
	// ClockRefresh (with OnClockJump) is how long a connection may go
	// without a write before it sends a PING of its own, so that its
	// clock readings stay at most that far apart on an idle master
	// (default 5s; negative: never).
	ClockRefresh time.Duration
	// OnReplicationID, if set, turns the replication check on: every
	// write batch also starts with INFO replication (after the clock
	// check's TIME), and the server's master_replid — which a server
	// takes anew each time it is promoted, and takes from its master while
	// it is a replica — is compared with the previous reading on the same
	// server (same run_id), across reconnects too (the handshake reads it
	// as well). A change is reported on the reader goroutine before any
	// reply of the batch's requests is delivered: a node of a Redis
	// Cluster demoted and promoted again between two slot-map loads may
	// have missed writes, and its caller can discard the votes in the
	// batch (docs/safety.md). It must not block. It costs one INFO
	// replication per write batch: the engine turns it on for cluster
	// nodes only.
	OnReplicationID func(ReplicationChange)
	// OnState, if set, is called on the Conn's goroutine each time it
	// comes up or goes down: once per change, not once per failed
	// reconnect attempt. It must not block.
	OnState func(StateChange)
}

// StateChange is a Conn's move between connected and not connected.
type StateChange struct {
	Addr string
	// Up reports whether the Conn is connected now.
	Up bool
	// Info is the server's identity, when Up.
	Info ServerInfo
	// Restarted is set, when Up, if the server's run_id differs from the
	// one of the previous connection: the master restarted (and may have
	// lost its data).
	Restarted bool
	// Err is why the Conn is down (the dial error, or what broke the
	// session), when not Up.
	Err error
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.KeepAlive, DefaultKeepAlive)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	// Not positive: the default (a backoff below zero crashed the Conn's
	// goroutine at its first failed connect).
	if c.ReconnectMin <= 0 {
		c.ReconnectMin = DefaultReconnectMin
	}
	if c.ReconnectMax <= 0 {
		c.ReconnectMax = DefaultReconnectMax
	}
	def(&c.StallTimeout, DefaultStallTimeout)
	if c.ReconnectMax < c.ReconnectMin {
		c.ReconnectMax = c.ReconnectMin
	}
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.OnClockJump != nil && c.ClockAllowance == nil {
		c.ClockAllowance = func(d time.Duration) time.Duration { return 2*time.Millisecond + d/100 }
	}
	def(&c.ClockRefresh, DefaultClockRefresh)
	if c.ReadBufferSize <= 0 {
		c.ReadBufferSize = DefaultReadBufferSize
	}
	return c
}

// ServerInfo identifies the server process behind a connection, read with
// INFO at connect time. A changed RunID means the master restarted.
type ServerInfo struct {
	RunID   string
	Version string
	// Uptime is the server's uptime_in_seconds (whole seconds), zero when
	// the server did not say.
	Uptime time.Duration
	// ConnectedAt is when the INFO reply had been read: the server wrote
	// Uptime no later than this.
	ConnectedAt time.Time
	// DeleteIfEqual is the server's compare-and-delete command, asked
	// with COMMAND INFO at connect: "DELEX" (Redis ≥ 8.4), "DELIFEQ"
	// (Valkey ≥ 9.0), or "" (none, or [Config.DisableNative]).
	DeleteIfEqual string
	// SetIfEqual reports whether the server's SET takes IFEQ (Redis ≥
	// 8.4, Valkey ≥ 8.1), from COMMAND DOCS SET at connect.
	SetIfEqual bool
}

// StartedBy returns the latest instant at which the server can have
// started: never earlier than its real start. Redis computes
// uptime_in_seconds as the difference of two wall-clock readings floored
// to whole seconds, which can exceed the real uptime by up to (not
// including) a second, so the start is at most ConnectedAt − Uptime + 1s.
// Restart quarantine counts from here, so that it can end late but never
// early.
func (i ServerInfo) StartedBy() time.Time {
	at := i.ConnectedAt
	if at.IsZero() {
		at = time.Now()
	}
	return at.Add(time.Second - i.Uptime)
}

// Stats are counters of one Conn since it was created.
type Stats struct {
	Connects  uint64 // successful connects (first one included)
	Timeouts  uint64 // requests failed with ErrTimeout
	Broken    uint64 // requests failed because the socket broke
	Writes    uint64 // write syscalls (batches)
	Requests  uint64 // requests accepted by Do
	Pending   int    // requests in flight now
	Connected bool
}

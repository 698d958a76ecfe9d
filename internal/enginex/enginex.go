// Package enginex is the engine's transport-level handle for this module's
// own tools (the proxy, the bench, tests): operations below the lock API
// that package engine does not export. Package engine registers the
// implementation when it is loaded; [Open] returns it for an engine.
package enginex

import (
	"context"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/resp"
)

// MasterReply is one master's answer to [Transport.Broadcast]: a reply
// (which may be a server error reply) or an error (timeout, connection
// down...). A grant from a master in restart quarantine ([Transport.Grant])
// has both: Err matching engine.ErrQuarantined (it is not an answer) and
// the Reply the master sent (what it wrote, for a cleanup).
type MasterReply struct {
	Reply resp.Reply // deep copy, safe to keep
	Err   error
}

// Failure returns why a master's part of a broadcast is not an answer:
// its transport error, or its error reply; nil for an answer.
func (r MasterReply) Failure() error {
	if r.Err == nil && r.Reply.IsError() {
		return r.Reply.Err()
	}
	return r.Err
}

// Lock is what an attached lock offers: the methods of *engine.Lock that
// need no acquisition.
type Lock interface {
	Unlock(ctx context.Context) error
	UnlockAsync(done func(error))
	ExtendAsync(ttl time.Duration, done func(error))
	Extend(ctx context.Context, ttl time.Duration) error
}

// Transport is the engine's transport-level surface.
type Transport interface {
	// Conns returns the connections to master i (for health, identity and
	// pipeline counters).
	Conns(i int) []*conn.Conn
	// MasterTimeout returns the per-master timeout of an operation on a
	// lock of ttl: Config.MasterTimeout when set, else max(5ms, min(50ms,
	// ttl/100)); for ttl ≤ 0 (reads, other commands) the 50ms cap.
	MasterTimeout(ttl time.Duration) time.Duration
	// Drift returns the clock drift allowance for ttl: ttl·DriftFactor +
	// DriftMin. A lock's validity is ttl − elapsed − Drift(ttl).
	Drift(ttl time.Duration) time.Duration
	// Broadcast sends one command to every master at once (one enqueue
	// each) and waits until all answered or timed out; timeout 0 means the
	// engine's MasterTimeout(0). It allocates; lock operations use the lock
	// API. If script is non-nil, cmd must be an EVALSHA of it (NOSCRIPT falls
	// back to EVAL). Replies are indexed like the engine's masters. It
	// returns ctx's error if ctx ends first (commands already sent may still
	// execute). key routes the command like a lock on that key (the same
	// connection per master as its acquire, cleanup, extend and release, so
	// they stay in order); "" for a command on no key.
	Broadcast(ctx context.Context, key string, timeout time.Duration, script *conn.Script, cmd []byte) ([]MasterReply, error)
	// BroadcastTo is Broadcast to the masters i for which to(i) is true
	// (the others' replies are left zero): a cleanup sent only where an
	// attempt wrote.
	BroadcastTo(ctx context.Context, key string, timeout time.Duration, script *conn.Script, cmd []byte, to func(i int) bool) ([]MasterReply, error)
	// Ask is Broadcast for a read whose answer tells a client about a
	// lock (GET, EXISTS, PTTL of a lock key, a library's TTL script): no
	// answer from a master in restart quarantine counts — it may have lost
	// the key in its restart — and each is returned as Err matching
	// engine.ErrQuarantined, as Grant's grants are.
	Ask(ctx context.Context, key string, timeout time.Duration, script *conn.Script, cmd []byte) ([]MasterReply, error)
	// Grant is Broadcast for a command that can grant or extend a lock for
	// ttl (a library's acquire or extend script, PEXPIRE): the one rule
	// every grant path shares. It refuses a ttl that is not a whole
	// positive number of milliseconds up to the engine's MaxTTL (an error
	// matching engine.ErrBadArgument), sends with the engine's per-master
	// timeout for ttl, and a reply for which granted reports true from a
	// master in restart quarantine when it arrives does not count: it is
	// returned as Err matching engine.ErrQuarantined (not an answer).
	Grant(ctx context.Context, key string, ttl time.Duration, script *conn.Script, cmd []byte, granted func(resp.Reply) bool) ([]MasterReply, error)
	// Attach returns a handle to a lock on key with token acquired
	// elsewhere (a proxy client that only sends the key and token back), so
	// it can be released or extended. ttl is the lock's TTL, used for
	// timeouts only. Attach does not contact the masters. The engine
	// counts and observes the lock's Extend, not its Unlock nor its end
	// (Stats, Observer.Release and Observer.Lost): the caller knows what
	// the token was — granted, or refused and cleaned up — and reports it.
	Attach(key, token string, ttl time.Duration) Lock
}

var open func(engine any) Transport

// Register installs the implementation; package engine calls it from init.
func Register(f func(engine any) Transport) { open = f }

// Open returns the transport of e, an *engine.Engine (it panics on any
// other type: a programming error inside this module).
func Open(e any) Transport { return open(e) }

package redisson

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/resp"
)

// Publisher delivers a message to this proxy's subscribers of a channel
// and returns how many got it. The RESP server's pub/sub satisfies it;
// it must not block.
type Publisher interface {
	Publish(channel, message string) (receivers int)
}

// LockReplies are the lock commands' reply primitives that Redisson's
// replies share, so that a client reads one wording whichever kind of
// lock it uses.
type LockReplies interface {
	// EngineErr is the error reply of an engine error.
	EngineErr(err error) []byte
	// Undecided is the error reply when too few masters answered a
	// quorum read or write, nil when enough did.
	Undecided(reps []enginex.MasterReply) []byte
	// Tokenless is the refusal of a command that changes a lock without
	// its token (cmd), naming the script to use instead.
	Tokenless(cmd, script string) string
	// Expire marks the reply of the command running with ctx as a grant
	// true only until deadline (its validity's end): one that could not
	// be sent by then is answered as expired (respserver.ExpireReply).
	Expire(ctx context.Context, deadline time.Time)
}

// Config configures [Locks]. Engine, Transport, Publisher and Replies are
// required.
type Config struct {
	// Engine is the lock engine whose masters keep the holds; Transport
	// is its broadcasts and agreed-value reads (enginex.Open(Engine)).
	Engine    *engine.Engine
	Transport enginex.Transport
	// KeyPrefix is the proxy's key prefix: keys reach Locks with it, and
	// channels are named by clients without it.
	KeyPrefix string
	// AllowTokenlessWrites serves forceUnlock (off: refused with
	// Replies.Tokenless).
	AllowTokenlessWrites bool
	// WakeChannel is the masters' channel of wake-ups across proxies
	// (default [DefaultWakeChannel]).
	WakeChannel string
	// LocalWakeups keeps wake-ups inside this proxy (no subscription to
	// WakeChannel, no publication on the masters).
	LocalWakeups bool
	// Publisher delivers wake-ups to this proxy's subscribers.
	Publisher Publisher
	// Replies are the lock commands' reply primitives.
	Replies LockReplies
	// Closing, when set and true, stops the fair locks' wake-up chains
	// (the server is shutting down).
	Closing *atomic.Bool
}

// Locks serves Redisson's recognised scripts over the quorum: one per
// proxy. Create it with [New]; [Locks.Close] stops what it started.
type Locks struct {
	cfg      Config
	eng      *engine.Engine
	tr       enginex.Transport
	wakes    *wakeRelay // wake-ups across proxies (nil with LocalWakeups)
	shutting *atomic.Bool
	// fairChains are the fair locks' wake-up chains (redisson_fair.go).
	fairChains fairChains
}

// New returns the Redisson room of a proxy and, unless cfg.LocalWakeups,
// subscribes to cfg.WakeChannel on every member.
func New(cfg Config) *Locks {
	if cfg.WakeChannel == "" {
		cfg.WakeChannel = DefaultWakeChannel
	}
	s := &Locks{cfg: cfg, eng: cfg.Engine, tr: cfg.Transport, shutting: cfg.Closing}
	if s.shutting == nil {
		s.shutting = new(atomic.Bool)
	}
	s.startWakeRelay()
	return s
}

// Close stops the fair locks' wake-up chains and the wake channel's
// subscriptions.
func (s *Locks) Close() {
	s.fairChains.stop()
	if s.wakes != nil {
		s.wakes.close()
	}
}

// Run computes a Redisson command's reply: appended to dst, or in a slice
// of its own. The proxy runs it off the reader, after the connection's
// earlier commands on the same locks.
type Run func(ctx context.Context, dst []byte) []byte

func (s *Locks) engineErr(err error) []byte                  { return s.cfg.Replies.EngineErr(err) }
func (s *Locks) undecided(reps []enginex.MasterReply) []byte { return s.cfg.Replies.Undecided(reps) }
func (s *Locks) publish(ch, msg string) int                  { return s.cfg.Publisher.Publish(ch, msg) }
func (s *Locks) drift(ttl time.Duration) time.Duration       { return s.tr.Drift(ttl) }

// isOne reports whether r is the integer 1.
func isOne(r resp.Reply) bool { return r.Type == resp.TypeInteger && r.Int == 1 }

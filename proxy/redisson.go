package proxy

import (
	"context"

	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// The wiring of the Redisson room (proxy/internal/redisson): which
// commands reach it, run off the reader in the connection's order on the
// locks it names, and what it takes from the server and the lock
// commands (roomHooks).

// DefaultWakeChannel is the masters' channel over which proxies tell each
// other that a Redisson hold ended (Config.WakeChannel).
const DefaultWakeChannel = redisson.DefaultWakeChannel

// roomHooks is what the Redisson room takes from the server (Publish)
// and from the lock commands (their reply primitives).
type roomHooks struct{ s *Server }

var (
	_ redisson.Publisher   = roomHooks{}
	_ redisson.LockReplies = roomHooks{}
)

func (h roomHooks) Publish(ch, msg string) int                  { return h.s.rs.Publish(ch, msg) }
func (h roomHooks) EngineErr(err error) []byte                  { return h.s.engineErr(err) }
func (h roomHooks) Undecided(reps []enginex.MasterReply) []byte { return h.s.undecided(reps) }
func (h roomHooks) Tokenless(cmd, script string) string         { return msgTokenless(cmd, script) }

// startRedisson starts the Redisson room over the server's engine. (Its
// locks' wake-up channels are the channels clients may subscribe to: New.)
func (s *Server) startRedisson() {
	h := roomHooks{s}
	s.redisson = redisson.New(redisson.Config{
		Engine: s.eng, Transport: s.tr, KeyPrefix: s.cfg.KeyPrefix,
		AllowTokenlessWrites: s.cfg.AllowTokenlessWrites,
		WakeChannel:          s.cfg.WakeChannel, LocalWakeups: s.cfg.LocalWakeups,
		Publisher: h, Replies: h, Closing: s.rs.Closing(),
	})
}

// runRedisson serves a recognised Redisson script (keys already carry the
// proxy's key prefix).
func (s *Server) runRedisson(c *client, rs *redisson.Script, keys, argv [][]byte) *call {
	locks, run, refusal := s.redisson.Serve(rs, keys, argv)
	if refusal != "" {
		return respserver.ErrCall(refusal)
	}
	return c.Async(locks, respserver.AsyncFunc(run))
}

// cmdHExists answers Redisson's isHeldByThread, cmdHGet its getHoldCount
// and a read-write lock's mode (redisson.Locks.HExists).
func (s *Server) cmdHExists(c *client, args [][]byte) *call {
	return c.Async(args[1:2], respserver.AsyncFunc(s.redisson.HExists(string(args[1]), string(args[2]))))
}

func (s *Server) cmdHGet(c *client, args [][]byte) *call {
	return c.Async(args[1:2], respserver.AsyncFunc(s.redisson.HGet(string(args[1]), string(args[2]))))
}

// redissonToken answers RFencedLock.getToken (GET of a token key).
func (s *Server) redissonToken(c *client, key []byte) *call {
	r := s.redisson
	return c.Async([][]byte{key}, func(ctx context.Context, _ []byte) []byte { return r.Token(ctx, key) })
}

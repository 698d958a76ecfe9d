package lockcmds

import (
	"context"
	"time"

	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// The wiring of the Redisson room (proxy/internal/redisson): which
// commands reach it, run off the reader in the connection's order on the
// locks it names, and what it takes from the server and the lock
// commands (roomHooks).

// roomHooks is what the Redisson room takes from the server (Publish)
// and from the lock commands (their reply primitives).
type roomHooks struct{ h *Commands }

var (
	_ redisson.Publisher   = roomHooks{}
	_ redisson.LockReplies = roomHooks{}
)

func (r roomHooks) Publish(ch, msg string) int                  { return r.h.srv.Publish(ch, msg) }
func (r roomHooks) EngineErr(err error) []byte                  { return r.h.engineErr(err) }
func (r roomHooks) Undecided(reps []enginex.MasterReply) []byte { return r.h.undecided(reps) }
func (r roomHooks) Tokenless(cmd, script string) string         { return msgTokenless(cmd, script) }
func (r roomHooks) Expire(ctx context.Context, deadline time.Time) {
	respserver.ExpireReply(ctx, deadline)
}

// startRedisson starts the Redisson room over the engine. (Its locks'
// wake-up channels are the channels clients may subscribe to: Channels.)
func (h *Commands) startRedisson() {
	r := roomHooks{h}
	h.redisson = redisson.New(redisson.Config{
		Engine: h.eng, Transport: h.tr, KeyPrefix: h.cfg.KeyPrefix,
		AllowTokenlessWrites: h.cfg.AllowTokenlessWrites,
		WakeChannel:          h.cfg.WakeChannel, LocalWakeups: h.cfg.LocalWakeups,
		Publisher: r, Replies: r, Closing: h.srv.Closing(),
	})
}

// runRedisson serves a recognised Redisson script (keys already carry the
// proxy's key prefix).
func (h *Commands) runRedisson(c *client, rs *redisson.Script, keys, argv [][]byte) *call {
	locks, run, refusal := h.redisson.Serve(rs, keys, argv)
	if refusal != "" {
		return respserver.ErrCall(refusal)
	}
	return c.Async(locks, respserver.AsyncFunc(run))
}

// cmdHExists answers Redisson's isHeldByThread, cmdHGet its getHoldCount
// and a read-write lock's mode (redisson.Locks.HExists).
func (h *Commands) cmdHExists(c *client, args [][]byte) *call {
	return c.Async(args[1:2], respserver.AsyncFunc(h.redisson.HExists(string(args[1]), string(args[2]))))
}

func (h *Commands) cmdHGet(c *client, args [][]byte) *call {
	return c.Async(args[1:2], respserver.AsyncFunc(h.redisson.HGet(string(args[1]), string(args[2]))))
}

// redissonToken answers RFencedLock.getToken (GET of a token key).
func (h *Commands) redissonToken(c *client, key []byte) *call {
	r := h.redisson
	return c.Async([][]byte{key}, func(ctx context.Context, _ []byte) []byte { return r.Token(ctx, key) })
}

package engine

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/resp"
)

// The transport-level surface (connections, broadcasts, attached locks) is
// not part of the lock API: this module's proxy and bench reach it through
// internal/enginex.
func init() {
	enginex.Register(func(x any) enginex.Transport { return transport{x.(*Engine)} })
}

// master is what a fan-out needs from one master connection;
// [*conn.Conn] implements it, and tests swap in a fake (Engine.fan).
type master interface {
	Do(req conn.Request) error
}

var _ master = (*conn.Conn)(nil)

type transport struct{ e *Engine }

var _ enginex.Transport = transport{}

func (t transport) MasterTimeout(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = 100 * MaxMasterTimeout
	}
	return t.e.cfg.masterTimeout(ttl)
}

func (t transport) Conns(i int) []*conn.Conn {
	if cl := t.e.cluster(i); cl != nil {
		return clusterConns(cl)
	}
	return append([]*conn.Conn(nil), t.e.conns[i]...)
}

func (t transport) Drift(ttl time.Duration) time.Duration { return t.e.cfg.drift(ttl) }

func (t transport) Attach(key, token string, ttl time.Duration) enginex.Lock {
	e := t.e
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	key = e.cfg.KeyPrefix + key
	l := &Lock{e: e, key: key, token: token, ttl: ttl, first: e.firstMaster(), attached: true}
	l.cix, l.khash = e.route(key)
	return l
}

func (t transport) Broadcast(ctx context.Context, key string, timeout time.Duration, script *conn.Script, cmd []byte) ([]enginex.MasterReply, error) {
	return t.e.broadcast(ctx, key, timeout, script, cmd, nil, nil)
}

func (t transport) BroadcastTo(ctx context.Context, key string, timeout time.Duration, script *conn.Script, cmd []byte, to func(int) bool) ([]enginex.MasterReply, error) {
	return t.e.broadcast(ctx, key, timeout, script, cmd, nil, to)
}

func (t transport) Ask(ctx context.Context, key string, timeout time.Duration, script *conn.Script, cmd []byte) ([]enginex.MasterReply, error) {
	return t.e.broadcast(ctx, key, timeout, script, cmd, anyReply, nil)
}

// anyReply: every answer of a quorum read is a vote on the lock's state.
func anyReply(resp.Reply) bool { return true }

func (t transport) Grant(ctx context.Context, key string, ttl time.Duration, script *conn.Script, cmd []byte, granted func(resp.Reply) bool) ([]enginex.MasterReply, error) {
	e := t.e
	if _, err := e.lockTTL(ttl); err != nil || ttl%time.Millisecond != 0 {
		return nil, cmp.Or(err, errBadTTL)
	}
	return e.broadcast(ctx, key, e.cfg.masterTimeout(ttl), script, cmd, granted, nil)
}

// broadcast sends cmd to every master (with to set, to those i for which
// to(i) is true) and collects their replies; with granted set, a grant
// from a master in quarantine is not an answer.
func (e *Engine) broadcast(ctx context.Context, key string, timeout time.Duration, script *conn.Script, cmd []byte, granted func(resp.Reply) bool, to func(int) bool) ([]enginex.MasterReply, error) {
	if len(cmd) == 0 {
		return nil, fmt.Errorf("%w: empty command", ErrBadArgument)
	}
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if timeout <= 0 {
		timeout = transport{e}.MasterTimeout(0)
	}
	b := &broadcast{e: e, granted: granted, replies: make([]enginex.MasterReply, e.n), left: e.n, done: make(chan struct{}), obs: e.obs, t1: time.Now()}
	deadline := time.Now().Add(timeout)
	cix := e.nextConn()
	if key != "" {
		cix = e.connFor(key)
	}
	for i := 0; i < e.n; i++ {
		if to != nil && !to(i) {
			b.record(i, enginex.MasterReply{}) // not sent
			continue
		}
		req := conn.Request{Cmd: cmd, Deadline: deadline, Callback: b, Tag: uint64(i), Script: script, Key: key}
		if err := e.pick(i, cix).Do(req); err != nil {
			b.Complete(uint64(i), resp.Reply{}, err)
		}
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.replies, nil
}

type broadcast struct {
	e *Engine
	// granted, when set, tells a grant (restart quarantine applies to it).
	granted func(resp.Reply) bool
	mu      sync.Mutex
	replies []enginex.MasterReply // guarded by mu
	left    int                   // guarded by mu
	done    chan struct{}
	obs     Observer  // nil when none: gets each master's round trip
	t1      time.Time // when the command was sent
}

func (b *broadcast) Complete(tag uint64, r resp.Reply, err error) {
	if b.obs != nil {
		rerr := err
		if rerr == nil && r.IsError() {
			rerr = r.Err()
		}
		b.obs.MasterReply(int(tag), time.Since(b.t1), rerr)
	}
	mr := enginex.MasterReply{Reply: r.Clone(), Err: err}
	if err == nil && b.granted != nil && b.granted(r) && b.e.quarantined(int(tag)) {
		mr.Err = b.e.quarantineErr(int(tag))
	}
	b.record(int(tag), mr)
}

// record stores master i's reply.
func (b *broadcast) record(i int, mr enginex.MasterReply) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.replies[i] = mr
	b.left--
	if b.left == 0 {
		close(b.done)
	}
}

// withinDeadline is the per-master timeout t of a call bounded by ctx:
// at most nine tenths of what is left of ctx's deadline, so that the
// masters that did not answer by then count as failures and the call
// decides from the others instead of returning ctx's error.
func withinDeadline(ctx context.Context, t time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		t = min(t, max(time.Until(d)*9/10, time.Millisecond))
	}
	return t
}

// sendAll sends cmd to every master on key's connection without waiting
// for the answers (best-effort writes: a fair waiter's leave and
// refresh); a master that is down or slow misses it.
func (e *Engine) sendAll(key string, script *conn.Script, cmd []byte) {
	if e.closed.Load() {
		return
	}
	deadline := time.Now().Add(transport{e}.MasterTimeout(0))
	cix := e.connFor(key)
	for i := 0; i < e.n; i++ {
		e.pick(i, cix).Do(conn.Request{Cmd: cmd, Deadline: deadline, Callback: discard{}, Tag: uint64(i), Script: script, Key: key})
	}
}

// discard is the callback of a request nobody waits for.
type discard struct{}

func (discard) Complete(uint64, resp.Reply, error) {}

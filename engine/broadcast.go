package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/resp"
)

// MasterReply is one master's answer to [Engine.Broadcast]: a reply (which
// may be a server error reply) or an error (timeout, connection down...).
type MasterReply struct {
	Reply resp.Reply // deep copy, safe to keep
	Err   error
}

// Broadcast sends one command to every master at once (one enqueue each)
// and waits until all answered or timed out; timeout 0 means
// [Engine.MasterTimeout](0) (50ms unless Config.MasterTimeout is set). It is the building block for
// commands that are not lock operations (reads, arbitrary scripts) and
// allocates; lock operations should use TryLock/Unlock/Extend. If script
// is non-nil, cmd must be an EVALSHA of it (NOSCRIPT falls back to EVAL).
// The replies are indexed like Config.Addrs. It returns ctx's error if ctx
// ends first (commands already sent may still execute). key routes the
// command like a lock on that key (the same connection per master as its
// acquire, cleanup, extend and release, so they stay in order); "" for a
// command on no key.
func (e *Engine) Broadcast(ctx context.Context, key string, timeout time.Duration, script *conn.Script, cmd []byte) ([]MasterReply, error) {
	if len(cmd) == 0 {
		return nil, fmt.Errorf("%w: empty command", ErrBadArgument)
	}
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if timeout <= 0 {
		timeout = e.MasterTimeout(0)
	}
	b := &broadcast{replies: make([]MasterReply, e.n), left: e.n, done: make(chan struct{})}
	deadline := time.Now().Add(timeout)
	cix := e.nextConn()
	if key != "" {
		cix = e.connFor(key)
	}
	for i := 0; i < e.n; i++ {
		req := conn.Request{Cmd: cmd, Deadline: deadline, Callback: b, Tag: uint64(i), Script: script}
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
	mu      sync.Mutex
	replies []MasterReply // guarded by mu
	left    int           // guarded by mu
	done    chan struct{}
}

func (b *broadcast) Complete(tag uint64, r resp.Reply, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.replies[tag] = MasterReply{Reply: r.Clone(), Err: err}
	b.left--
	if b.left == 0 {
		close(b.done)
	}
}

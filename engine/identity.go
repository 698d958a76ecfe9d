package engine

import (
	"context"
	"fmt"
	"time"
)

// MasterTimeout returns the per-master timeout of an operation on a lock
// of ttl: [Config.MasterTimeout] when set, else max(5ms, min(50ms,
// ttl/100)); for ttl ≤ 0 (reads, other commands) the 50ms cap.
func (e *Engine) MasterTimeout(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = 100 * MaxMasterTimeout
	}
	return e.cfg.masterTimeout(ttl)
}

// Config returns the engine's configuration with every default filled in.
func (e *Engine) Config() Config {
	c := e.cfg
	c.Addrs = append([]string(nil), c.Addrs...)
	return c
}

// CheckDistinct waits until every master is connected or ctx ends, then
// returns an error matching [ErrDuplicateMaster] if two addresses reached
// the same server (the same run_id from INFO). Masters not connected by
// then are not compared (they are checked by nobody: call it again later).
// Use it at start-up: exact duplicate addresses are already refused by
// [New], but "localhost:6379" and "127.0.0.1:6379", or two DNS names of one
// host, are only found by asking the servers.
func (e *Engine) CheckDistinct(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !e.allConnected() {
		select {
		case <-ctx.Done():
			return e.duplicates()
		case <-t.C:
		}
		if e.closed.Load() {
			return ErrClosed
		}
	}
	return e.duplicates()
}

func (e *Engine) allConnected() bool {
	for _, cs := range e.conns {
		if !cs[0].Connected() {
			return false
		}
	}
	return true
}

func (e *Engine) duplicates() error {
	seen := map[string]int{}
	for i, cs := range e.conns {
		if !cs[0].Connected() {
			continue
		}
		id := cs[0].Info().RunID
		if id == "" {
			continue
		}
		if j, ok := seen[id]; ok {
			return fmt.Errorf("%w: masters %d (%s) and %d (%s) are the same server (run_id %s)",
				ErrDuplicateMaster, j, e.addrs[j], i, e.addrs[i], id)
		}
		seen[id] = i
	}
	return nil
}

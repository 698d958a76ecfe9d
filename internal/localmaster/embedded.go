package localmaster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

func startEmbedded(ctx context.Context, n int) (*Set, error) {
	s := &Set{embedded: true, masters: make([]*Master, 0, n)}
	for i := range n {
		if err := ctx.Err(); err != nil {
			s.Close()
			return nil, fmt.Errorf("localmaster: %w", err)
		}
		m := &Master{index: i, embedded: true}
		if err := m.serveEmbeddedLocked("127.0.0.1:0"); err != nil {
			s.Close()
			return nil, err
		}
		s.masters = append(s.masters, m)
	}
	return s, nil
}

// serveEmbeddedLocked starts a fresh, empty miniredis on addr.
func (m *Master) serveEmbeddedLocked(addr string) error {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr(addr); err != nil {
		return fmt.Errorf("localmaster: embedded master %d on %s: %w", m.index, addr, err)
	}
	mr.Server().SetPreHook(wallClock(mr))
	m.mini, m.addr = mr, mr.Addr()
	return nil
}

// wallClock returns a hook run before every command that advances mr's TTLs
// by the time elapsed since the previous command: miniredis never expires
// keys on its own, and Redlock depends on keys expiring.
//
// Commands issued by a Lua script run the hook too, with mr already locked
// by the script; those (and commands racing another one that holds the
// lock) skip the update, and the elapsed time is caught up by the next one.
func wallClock(mr *miniredis.Miniredis) server.Hook {
	var mu sync.Mutex
	last := time.Now()
	return func(*server.Peer, string, ...string) bool {
		if !mr.TryLock() {
			return false
		}
		mr.Unlock()
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if d := now.Sub(last); d >= time.Millisecond {
			mr.FastForward(d)
			last = now
		}
		return false
	}
}

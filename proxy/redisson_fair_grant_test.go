package proxy

// A Redisson RFairLock grant is valid when it is answered (the grant
// rule's (c)), even with a master slow to take the waiter off the queue.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

// TestRedissonFairGrantValidAtReply: a waiting tryLock granted from zero
// checks validity, then waits (rBestEffort, up to CleanupTimeout) for the
// queue leave on every master before answering. One slow master delays
// the grant past its lease: the reply says "acquired" while no master
// holds the lock any more (DESIGN §5 (c): valid at that moment, checked
// last).
//
// Found by the adversarial review of the proxy's RFairLock: it failed
// before its fix.
func TestRedissonFairGrantValidAtReply(t *testing.T) {
	set := mastertest.Start(t, 5)
	relays, raddrs := startRelays(t, set.Addrs())
	e := startEnvOn(t, set, func(c *Config) {
		c.EngineConfig.Addrs = raddrs
		c.EngineConfig.MasterTimeout = 20 * time.Millisecond
		c.EngineConfig.CleanupTimeout = 300 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prof := redissonwire.RWProfiles[0]
	name := "fairreview-late"
	a := dialAs(t, e.addr, "", prof)
	b := dialAs(t, e.addr, "", prof)
	if ok, err := a.FairTryLock(ctx, name, 1, 30*time.Second); !ok || err != nil {
		t.Fatalf("a's tryLock(): %v %v", ok, err)
	}
	lease := 150 * time.Millisecond
	if ok, _, err := b.FairTryLockWait(ctx, name, 1, lease, 10*time.Second); ok || err != nil {
		t.Fatalf("b queues: %v %v", ok, err)
	}
	if n, err := a.FairUnlock(ctx, name, 1, 30*time.Second); n != 1 || err != nil {
		t.Fatalf("a's unlock: %d %v", n, err)
	}
	relays[4].Hold() // one master of five stops answering
	defer relays[4].Release()
	t0 := time.Now()
	ok, ttl, err := b.FairTryLockWait(ctx, name, 1, lease, 10*time.Second)
	dt := time.Since(t0)
	held := 0
	for _, m := range e.masters[:4] {
		if v, _ := m.Get(ctx, name).Result(); strings.HasPrefix(v, b.Owner(1)+"|R|1|") {
			held++
		}
	}
	if !ok || err != nil {
		t.Fatalf("b's try: %v %d %v (after %v)", ok, ttl, err, dt)
	}
	if held < e.quorum() {
		t.Fatalf("b's tryLock answered 'acquired' after %v (lease %v), when %d masters still held its lock (quorum %d): the grant was expired when answered", dt, lease, held, e.quorum())
	}
}

package proxy

// Redisson's unlock latch (3.24.0+): a retried unlock answers from its
// latch only when that answer holds at the quorum. The latch's RLock cases
// are TestRedissonUnlockLatch (redisson_test.go), TestRedissonLatchShape
// (redisson_state_test.go), TestRedissonLatchAcrossProxies and
// TestRedissonLatchOnCluster (redisson_masters_test.go).

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/redissonwire"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
)

// TestRedissonRWUnlockOwnLatch: the last reader A's unlock
// (3.24.0+, with the unlock latch) compare-and-deletes the value; the
// delete lands on master 1 only, because another reader B's join (through
// another proxy, whose own write to master 1 is slow) changed masters 2
// and 3 first — B is granted there. The unlock's retry read its own
// latch "1" from master 1 and answered 1, "released", with no change at
// the quorum: masters 2 and 3 still listed A, whose watchdog Redisson
// had cancelled. Now only the first try answers from a latch: the retry
// sees {A,B} at the quorum, removes A and answers 0 (what Redisson
// answers when B's join came first), and the answer's latch is written
// on every master.
//
// Found by the adversarial review of the proxy's RReadWriteLock: it failed
// before its fix.
func TestRedissonRWUnlockOwnLatch(t *testing.T) {
	set := startEnv(t, 3, nil).set
	relays, raddrs := startRelays(t, set.Addrs())
	e := startEnvOn(t, set, func(c *Config) {
		c.EngineConfig.Addrs = raddrs
		c.EngineConfig.MasterTimeout = 3 * time.Second
	})
	prof := redissonwire.Profiles[0] // 3.44.0 read unlock: the latch
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "rwreview-latch"
	a := dialAs(t, e.addr, "", prof)
	if ok, _, err := a.ReadTryLock(ctx, name, 1, 30*time.Second); !ok || err != nil {
		t.Fatalf("A's read tryLock: %v %v", ok, err)
	}
	v0 := e.masters[0].Get(ctx, name).Val()
	withB, ok := redisson.RWJoin(v0, "other-proxy-client:7")
	if !ok {
		t.Fatalf("value %q", v0)
	}

	const d = 200 * time.Millisecond
	relays[1].SetDelay(d)
	relays[2].SetDelay(d)
	type res struct {
		n   int64
		err error
	}
	done := make(chan res, 1)
	go func() {
		n, err := a.ReadUnlock(ctx, name, 1)
		done <- res{n, err}
	}()
	// A's read reaches masters 2 and 3 at +d, its delete at about +3d:
	// B's join lands on them in between.
	time.Sleep(d * 3 / 2)
	for _, m := range e.masters[1:] {
		if cur := m.Get(ctx, name).Val(); cur != v0 {
			t.Fatalf("master holds %q before the join; want A's value", cur)
		}
		m.Set(ctx, name, withB, 30*time.Second)
	}
	r := <-done
	relays[1].SetDelay(0)
	relays[2].SetDelay(0)
	var vals []string
	for _, m := range e.masters {
		vals = append(vals, m.Get(ctx, name).Val())
	}
	n, _ := a.RWHoldCount(ctx, name, 1, false)
	t.Logf("A's unlock answered %d, %v; masters now %q; A's hold count at the quorum: %d", r.n, r.err, vals, n)
	if r.err == nil && r.n == 1 && n > 0 {
		t.Fatalf("A's read unlock answered 1 (released, from its own latch on one master) while a quorum still lists A (hold count %d): the unlock did nothing at the quorum", n)
	}
}

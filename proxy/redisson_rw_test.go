package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

// TestRedissonRWLock replays Redisson's RReadWriteLock traffic, for every
// release whose texts differ (3.20.0 to 4.7), through two proxies on the
// same five masters, each client's commands going to either, and the
// first proxy restarted mid-hold: shared reads, a writer refused and
// waiting, re-entry, renewal, isLocked/getHoldCount, a writer's own read
// hold, nested and final unlocks with each release's replies, wake-ups
// across proxies ("0" for a reader's unlock, "1" for a writer's), and
// forceUnlock.
func TestRedissonRWLock(t *testing.T) {
	eachAcrossProxies(t, "rw-", redissonRWAcrossProxies)
}

// eachAcrossProxies runs body for every release of RWProfiles through two
// proxies on the same five masters (with --allow-tokenless-writes, for
// forceUnlock); restart replaces the first proxy (the two take turns) by
// a new server on the same masters.
func eachAcrossProxies(t *testing.T, prefix string, body func(t *testing.T, prof redissonwire.Profile, name string, p1 func() string, p2 string, restart func(), e *env)) {
	mod := func(c *Config) { c.AllowTokenlessWrites = true }
	e1 := startEnv(t, 5, mod)
	e2 := startEnvOn(t, e1.set, mod)
	top := t
	for i, prof := range redissonwire.RWProfiles {
		t.Run(prof.Name, func(t *testing.T) {
			first, second := &e1, &e2
			if i%2 == 1 {
				first, second = second, first
			}
			body(t, prof, prefix+strings.ReplaceAll(prof.Name, " ", ""), func() string { return (*first).addr }, (*second).addr, func() {
				(*first).srv.Close()
				*first = startEnvOn(top, e1.set, mod) // lives on after this subtest
			}, e1)
		})
	}
}

func redissonRWAcrossProxies(t *testing.T, prof redissonwire.Profile, name string, p1 func() string, p2 string, restart func(), e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lease := 30 * time.Second
	a1 := dialAs(t, p1(), "", prof)
	a2 := dialAs(t, p2, a1.ID, prof)
	b1 := dialAs(t, p1(), "", prof)
	c1 := dialAs(t, p1(), "", prof)
	c2 := dialAs(t, p2, c1.ID, prof)
	freeNil := strings.HasPrefix(prof.RWReadUnlock, "redisson-3.44")

	// Two readers share the lock, through either proxy.
	if ok, _, err := a1.ReadTryLock(ctx, name, 1, lease); !ok || err != nil {
		t.Fatalf("a's read tryLock through P1: %v, %v", ok, err)
	}
	if ok, _, err := b1.ReadTryLock(ctx, name, 7, lease); !ok || err != nil {
		t.Fatalf("b's read tryLock through P1 while a reads: %v, %v; want shared", ok, err)
	}
	held := 0
	for _, m := range e.masters {
		if v, _ := m.Get(ctx, name).Result(); strings.HasPrefix(v, "rw|r|") {
			held++
		}
	}
	if held < e.quorum() {
		t.Fatalf("%d masters hold the read lock's value", held)
	}
	if ok, err := a2.ReadIsLocked(ctx, name); !ok || err != nil {
		t.Fatalf("readLock().isLocked through P2: %v, %v", ok, err)
	}
	if ok, err := a2.WriteIsLocked(ctx, name); ok || err != nil {
		t.Fatalf("writeLock().isLocked through P2 while read-locked: %v, %v", ok, err)
	}
	if ok, ttl, err := c2.WriteTryLock(ctx, name, 1, lease); ok || err != nil || ttl <= 0 || ttl > lease.Milliseconds() {
		t.Fatalf("a write tryLock while read-locked: %v, ttl %d, %v; want refused with the TTL", ok, ttl, err)
	}
	if ok, _, err := a2.ReadTryLock(ctx, name, 1, lease); !ok || err != nil {
		t.Fatalf("a's read re-entry through P2: %v, %v", ok, err)
	}
	if n, err := a1.RWHoldCount(ctx, name, 1, false); n != 2 || err != nil {
		t.Fatalf("a's read hold count: %d, %v; want 2", n, err)
	}
	if n, err := a2.ReadRenew(ctx, name, 1, lease); n != 1 || err != nil {
		t.Fatalf("a's read renewal through P2: %d, %v; want 1", n, err)
	}
	if n, err := c2.ReadRenew(ctx, name, 1, lease); n != 0 || err != nil {
		t.Fatalf("a renewal by a thread that holds nothing: %d, %v; want 0", n, err)
	}

	restart()
	a1 = dialAs(t, p1(), a1.ID, prof)
	b1 = dialAs(t, p1(), b1.ID, prof)
	c1 = dialAs(t, p1(), c1.ID, prof)
	if n, err := a1.ReadRenew(ctx, name, 1, lease); n != 1 || err != nil {
		t.Fatalf("a's read renewal through P1 after its restart: %d, %v; want 1", n, err)
	}
	if n, err := a1.RWHoldCount(ctx, name, 1, false); n != 2 || err != nil {
		t.Fatalf("a's read hold count through P1 after its restart: %d, %v; want 2", n, err)
	}

	// A writer waits through P2 until the last reader leaves through P1:
	// woken across proxies.
	done := make(chan error, 1)
	go func() {
		_, err := c2.RWLockAt(ctx, name, 1, lease, true)
		done <- err
	}()
	for i, step := range []struct {
		c    *redissonwire.Client
		th   int64
		want int64
	}{{a2, 1, 0}, {a1, 1, 0}} {
		if n, err := step.c.ReadUnlock(ctx, name, step.th); n != step.want || err != nil {
			t.Fatalf("read unlock %d: %d, %v; want %d (b still reads)", i, n, err, step.want)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the writer's lock() returned while b reads: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	start := time.Now()
	if n, err := b1.ReadUnlock(ctx, name, 7); n != 1 || err != nil {
		t.Fatalf("the last read unlock: %d, %v; want 1", n, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the writer waited %v after the last reader left: not woken", waited)
	}

	// The writer re-enters, takes a read hold of its own thread; others
	// are refused.
	if ok, err := a1.WriteIsLocked(ctx, name); !ok || err != nil {
		t.Fatalf("writeLock().isLocked: %v, %v", ok, err)
	}
	if ok, _, err := c1.WriteTryLock(ctx, name, 1, lease); !ok || err != nil {
		t.Fatalf("the writer's re-entry through P1: %v, %v", ok, err)
	}
	if pttl, _ := c1.TTL(ctx, name); pttl <= lease.Milliseconds() {
		t.Errorf("PTTL %d after a write re-entry; want the lease added to the TTL left (Redisson's)", pttl)
	}
	if ok, _, err := c2.ReadTryLock(ctx, name, 1, lease); !ok || err != nil {
		t.Fatalf("the writer's own read: %v, %v", ok, err)
	}
	if n, err := c2.RWHoldCount(ctx, name, 1, true); n != 2 || err != nil {
		t.Fatalf("the write hold count: %d, %v; want 2", n, err)
	}
	if ok, ttl, err := a1.ReadTryLock(ctx, name, 1, lease); ok || err != nil || ttl <= 0 {
		t.Fatalf("another reader while write-locked: %v, ttl %d, %v; want refused", ok, ttl, err)
	}
	if ok, _, err := c2.WriteTryLock(ctx, name, 2, lease); ok || err != nil {
		t.Fatalf("another thread's write tryLock: %v, %v; want refused", ok, err)
	}
	if _, err := a2.WriteUnlock(ctx, name, 1, lease); !errors.Is(err, redissonwire.ErrNotOwner) {
		t.Fatalf("another thread's write unlock: %v; want not locked by current thread", err)
	}
	if n, err := c1.WriteRenew(ctx, name, 1, lease); n != 1 || err != nil {
		t.Fatalf("the writer's renewal: %d, %v; want 1", n, err)
	}
	if n, err := c2.WriteUnlock(ctx, name, 1, lease); n != 0 || err != nil {
		t.Fatalf("the nested write unlock: %d, %v; want 0", n, err)
	}
	if pttl, _ := c1.TTL(ctx, name); pttl < lease.Milliseconds()-5000 {
		t.Errorf("PTTL %d after the nested write unlock; want at least the lease (never lowered)", pttl)
	}
	if n, err := c1.WriteUnlock(ctx, name, 1, lease); n != 1 || err != nil {
		t.Fatalf("the write unlock: %d, %v; want 1", n, err)
	}
	// The writer's read hold remains: a read lock now.
	if ok, err := a2.WriteIsLocked(ctx, name); ok || err != nil {
		t.Fatalf("writeLock().isLocked after the write unlock: %v, %v", ok, err)
	}
	if ok, err := a2.ReadIsLocked(ctx, name); !ok || err != nil {
		t.Fatalf("readLock().isLocked with the writer's read hold left: %v, %v", ok, err)
	}
	// 3.44.0+ renews the write owner only (0: it holds no write);
	// earlier releases fall back to the read renewal (1).
	want := int64(1)
	if prof.Renew == "redisson-3.44.0-renewLocksBatch" {
		want = 0
	}
	if n, err := c1.WriteRenew(ctx, name, 1, lease); n != want || err != nil {
		t.Fatalf("the writer's renewal after its write unlock: %d, %v; want %d", n, err, want)
	}
	if n, err := c1.ReadUnlock(ctx, name, 1); n != 1 || err != nil {
		t.Fatalf("the former writer's read unlock: %d, %v; want 1 (free)", n, err)
	}
	// Unlocking a free lock: 1 up to 3.43.0, nil (an exception) from 3.44.0.
	n, err := a1.ReadUnlock(ctx, name, 1)
	if freeNil && !errors.Is(err, redissonwire.ErrNotOwner) || !freeNil && (n != 1 || err != nil) {
		t.Fatalf("unlocking a free read lock: %d, %v (nil reply from 3.44.0: %v)", n, err, freeNil)
	}

	// A reader waits through P1 for a write unlock through P2: message "1".
	if ok, _, err := c2.WriteTryLock(ctx, name, 3, lease); !ok || err != nil {
		t.Fatalf("write tryLock of a free lock: %v, %v", ok, err)
	}
	go func() {
		_, err := a1.RWLockAt(ctx, name, 1, lease, false)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	start = time.Now()
	if n, err := c2.WriteUnlock(ctx, name, 3, lease); n != 1 || err != nil {
		t.Fatalf("write unlock: %d, %v", n, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the reader waited %v after the write unlock: not woken", waited)
	}

	// forceUnlock ends the lock only in its own mode.
	if ok, err := a2.RWForceUnlock(ctx, name, true); ok || err != nil {
		t.Fatalf("the write lock's forceUnlock of a read lock: %v, %v; want false", ok, err)
	}
	if ok, err := a2.RWForceUnlock(ctx, name, false); !ok || err != nil {
		t.Fatalf("the read lock's forceUnlock: %v, %v; want true", ok, err)
	}
	if ok, err := a1.ReadIsLocked(ctx, name); ok || err != nil {
		t.Fatalf("read-locked after forceUnlock: %v, %v", ok, err)
	}
}

// TestRedissonRWCountNeverUnder is TestRedissonCountNeverUnder for a read
// hold: two of five masters are paused during two read re-entries (count
// 3 on the other three), then two of those three are paused and the
// stale ones resumed. No read unlock may release early — each answers 0
// or the unavailable error until the third successful one — and a
// writer is refused until then. Redisson's own script, run per master,
// would delete the lock on the stale masters at the first unlock.
func TestRedissonRWCountNeverUnder(t *testing.T) {
	e := startEnv(t, 5, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prof := redissonwire.RWProfiles[0]
	a := dialAs(t, e.addr, "", prof)
	b := dialAs(t, e.addr, "", prof)
	countNeverUnder(t, e,
		func() (bool, error) { ok, _, err := a.ReadTryLock(ctx, "rcounted", 1, 30*time.Second); return ok, err },
		func() (int64, error) { return a.ReadUnlock(ctx, "rcounted", 1) },
		func() (bool, error) { ok, _, err := b.WriteTryLock(ctx, "rcounted", 1, 30*time.Second); return ok, err })
}

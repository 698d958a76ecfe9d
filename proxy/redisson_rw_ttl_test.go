package proxy

// A Redisson read-write lock's TTL is only ever raised — by a renewal, a
// read unlock's "TTL as it is", a write re-entry through a proxy with a
// shorter --max-ttl — so no hold is cut short for the other holders.

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

// TestRedissonRWRenewalKeepsOtherReaders: reader A takes a read hold with
// an explicit lease of 6 s (no watchdog). Reader B joins with the
// watchdog; its renewal PEXPIREd the whole lock to B's 700 ms lease, B
// unlocks (the TTL "is left as it is"), and the lock expired ~0.7 s later
// while A's hold was still within its lease: a writer was granted next to
// a valid reader. A read-write lock's renewal now only raises the TTL. Redisson 4.4.0+ (the release whose renewal text is served
// here) keeps A: its renewal pexpires only B's own timeout keys, and B's
// unlock sets the lock's TTL to the longest remaining reader timeout
// (A's ~5 s).
//
// Found by the adversarial review of the proxy's RReadWriteLock: it failed
// before its fix.
func TestRedissonRWRenewalKeepsOtherReaders(t *testing.T) {
	e := startEnv(t, 3, nil)
	prof := redissonwire.Profiles[0] // 4.7: rwReadLockTask 4.4.0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := dialAs(t, e.addr, "", prof)
	b := dialAs(t, e.addr, "", prof)
	w := dialAs(t, e.addr, "", prof)
	name := "rwreview-renew-cut"

	aLease := 6 * time.Second
	t0 := time.Now()
	if ok, _, err := a.ReadTryLock(ctx, name, 1, aLease); !ok || err != nil {
		t.Fatalf("A's read tryLock: %v %v", ok, err)
	}
	bLease := 700 * time.Millisecond
	if ok, _, err := b.ReadTryLock(ctx, name, 1, bLease); !ok || err != nil {
		t.Fatalf("B's read tryLock: %v %v", ok, err)
	}
	if n, err := b.ReadRenew(ctx, name, 1, bLease); n != 1 || err != nil {
		t.Fatalf("B's renewal: %d %v", n, err)
	}
	if n, err := b.ReadUnlock(ctx, name, 1); n != 0 || err != nil {
		t.Fatalf("B's unlock: %d %v; want 0 (A still reads)", n, err)
	}
	pttl, _ := a.TTL(ctx, name)
	t.Logf("PTTL after B's renewal and unlock: %d ms (A's hold has ~%v left)", pttl, aLease-time.Since(t0))
	time.Sleep(bLease + 200*time.Millisecond)
	ok, _, err := w.WriteTryLock(ctx, name, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if left := aLease - time.Since(t0); ok && left > time.Second {
		t.Fatalf("a writer was granted while reader A's read hold (lease %v) still had %v left: two holders", aLease, left.Round(time.Millisecond))
	}
}

// TestRedissonRWOwnReadRenewalKeepsWrite: the same cause with two
// writers. Writer W takes the write lock with an explicit lease of 6 s (no
// watchdog); its own thread takes a read hold with the watchdog, whose
// renewal PEXPIREs the whole value to 700 ms; the thread's read unlock
// leaves "the TTL as it is"; ~0.7 s later the value is gone and a second
// writer is granted while W's write hold still has ~5 s of its lease.
// (Redisson's own scripts do the same on one Redis — its read renewal
// pexpires the hash — but safety.md claims a writer's value "holds till
// at least the end of W's validity on every master of Q".)
//
// Found by the adversarial review of the proxy's RReadWriteLock: it failed
// before its fix.
func TestRedissonRWOwnReadRenewalKeepsWrite(t *testing.T) {
	e := startEnv(t, 3, nil)
	prof := redissonwire.Profiles[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := dialAs(t, e.addr, "", prof)
	w2 := dialAs(t, e.addr, "", prof)
	name := "rwreview-own-read-cut"
	wLease := 6 * time.Second
	t0 := time.Now()
	if ok, _, err := w.WriteTryLock(ctx, name, 1, wLease); !ok || err != nil {
		t.Fatalf("W's write tryLock: %v %v", ok, err)
	}
	rLease := 700 * time.Millisecond
	if ok, _, err := w.ReadTryLock(ctx, name, 1, rLease); !ok || err != nil {
		t.Fatalf("W's thread's read tryLock: %v %v", ok, err)
	}
	if n, err := w.ReadRenew(ctx, name, 1, rLease); n != 1 || err != nil {
		t.Fatalf("the read renewal: %d %v", n, err)
	}
	if n, err := w.ReadUnlock(ctx, name, 1); n != 0 || err != nil {
		t.Fatalf("the read unlock: %d %v; want 0 (the write hold remains)", n, err)
	}
	time.Sleep(rLease + 200*time.Millisecond)
	ok, _, err := w2.WriteTryLock(ctx, name, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if left := wLease - time.Since(t0); ok && left > time.Second {
		t.Fatalf("a second writer was granted while W's write hold (lease %v) still had %v left: two writers", wLease, left.Round(time.Millisecond))
	}
}

// TestRedissonRWReentryNeverLowers: two proxies of the same masters whose
// --max-ttl differ (a rolling configuration change). W takes the write
// lock through P1 with a 6 s lease; its re-entry through P2 (max-ttl
// 1.5 s) with a 1 s lease set the TTL "exact" to min(pttl+lease, P2's
// MaxTTL) = 1.5 s, lowering it, and a second writer was granted while W's
// first hold still had ~4 s of its lease. Now a re-entry only raises.
//
// Found by the second adversarial review of the proxy's RReadWriteLock: it
// failed before a re-entry only raised the TTL.
func TestRedissonRWReentryNeverLowers(t *testing.T) {
	set := startEnv(t, 3, nil).set
	p1 := startEnvOn(t, set, func(c *Config) { c.EngineConfig.MaxTTL = 30 * time.Second })
	p2 := startEnvOn(t, set, func(c *Config) { c.EngineConfig.MaxTTL = 1500 * time.Millisecond })
	prof := redissonwire.RWProfiles[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w1 := dialAs(t, p1.addr, "", prof)
	w1b := dialAs(t, p2.addr, w1.ID, prof)
	w2 := dialAs(t, p1.addr, "", prof)
	name := "rwreview2-reentry-cap"
	t0 := time.Now()
	const lease = 6 * time.Second
	if ok, _, err := w1.WriteTryLock(ctx, name, 1, lease); !ok || err != nil {
		t.Fatalf("W's write tryLock: %v %v", ok, err)
	}
	if ok, _, err := w1b.WriteTryLock(ctx, name, 1, time.Second); !ok || err != nil {
		t.Fatalf("W's re-entry through P2: %v %v", ok, err)
	}
	pttl, _ := w1.TTL(ctx, name)
	t.Logf("PTTL after the re-entry: %d ms", pttl)
	time.Sleep(1700 * time.Millisecond)
	ok, _, err := w2.WriteTryLock(ctx, name, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if left := lease - time.Since(t0); ok && left > time.Second {
		t.Fatalf("a second writer was granted while W's write hold (lease %v, through P1) still had %v left: the re-entry through P2 lowered the TTL to P2's max-ttl", lease, left.Round(time.Millisecond))
	}
}

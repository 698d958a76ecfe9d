package proxy

// Found by the adversarial review of the proxy's RReadWriteLock (each
// failed before its fix): a renewal that lowered the TTL other holders
// relied on, and an unlock's retry that answered from its own latch.

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
	st, ok := parseRW(v0)
	if !ok {
		t.Fatalf("value %q", v0)
	}
	withB := st.with("other-proxy-client:7", 1).value()

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

// TestRedissonRWOwnReadRenewalKeepsWrite: the same cause with two
// writers. Writer W takes the write lock with an explicit lease of 6 s (no
// watchdog); its own thread takes a read hold with the watchdog, whose
// renewal PEXPIREs the whole value to 700 ms; the thread's read unlock
// leaves "the TTL as it is"; ~0.7 s later the value is gone and a second
// writer is granted while W's write hold still has ~5 s of its lease.
// (Redisson's own scripts do the same on one Redis — its read renewal
// pexpires the hash — but safety.md claims a writer's value "holds till
// at least the end of W's validity on every master of Q".)
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

package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/redissonwire"
)

// TestZZRWRenewalCutsAnotherReadersLease: reader A takes a read hold with
// an explicit lease of 6 s (no watchdog). Reader B joins with the
// watchdog; its renewal PEXPIREs the whole lock to B's 700 ms lease, B
// unlocks (the TTL "is left as it is"), and the lock expires ~0.7 s later
// while A's hold is still within its lease: a writer is granted next to a
// valid reader. Redisson 4.4.0+ (the release whose renewal text is served
// here) keeps A: its renewal pexpires only B's own timeout keys, and B's
// unlock sets the lock's TTL to the longest remaining reader timeout
// (A's ~5 s).
func TestZZRWRenewalCutsAnotherReadersLease(t *testing.T) {
	e := startEnv(t, 3, nil)
	prof := redissonwire.Profiles[0] // 4.7: rwReadLockTask 4.4.0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := dialAs(t, e.addr, "", prof)
	b := dialAs(t, e.addr, "", prof)
	w := dialAs(t, e.addr, "", prof)
	name := "zzrw-renew-cut"

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

// TestZZRWUnlockRacesAnotherReader: readers that lock and unlock the same
// read lock concurrently. Redisson's unlock is one atomic script, never an
// error; here a read unlock whose compare-and-set loses to another
// reader's join (or unlock) of the same lock answers "unavailable: no value
// of this lock is held by a quorum" — with every master up — and the
// unlocked hold stays in the value (Redisson cancels the watchdog on an
// unlock error, but the other readers' renewals keep the whole lock, so
// the stale entry holds writers off as long as any reader is active).
func TestZZRWUnlockRacesAnotherReader(t *testing.T) {
	e := startEnv(t, 3, nil)
	prof := redissonwire.Profiles[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "zzrw-unlock-race"
	// One reader keeps the lock read-locked throughout, so that every
	// other unlock takes the "holds remain" compare-and-set.
	base := dialAs(t, e.addr, "", prof)
	if ok, _, err := base.ReadTryLock(ctx, name, 99, 30*time.Second); !ok || err != nil {
		t.Fatalf("base reader: %v %v", ok, err)
	}
	var unlockErrs, lockErrs, rounds atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for g := range 8 {
		c := dialAs(t, e.addr, "", prof)
		wg.Go(func() {
			for time.Now().Before(stop) {
				ok, _, err := c.ReadTryLock(ctx, name, int64(g), 30*time.Second)
				if err != nil || !ok {
					lockErrs.Add(1)
					first.CompareAndSwap(nil, fmt.Sprintf("read tryLock: %v %v", ok, err))
					continue
				}
				if _, err := c.ReadUnlock(ctx, name, int64(g)); err != nil {
					unlockErrs.Add(1)
					first.CompareAndSwap(nil, fmt.Sprintf("read unlock: %v", err))
				}
				rounds.Add(1)
			}
		})
	}
	wg.Wait()
	if n, err := base.ReadUnlock(ctx, name, 99); err != nil || n != 1 {
		t.Errorf("the base reader's unlock after all others left: %d, %v; want 1 (free) — stale entries: %v", n, err, e.masters[0].Get(ctx, name).Val())
	}
	if unlockErrs.Load() > 0 || lockErrs.Load() > 0 {
		t.Fatalf("%d rounds: %d read unlocks and %d read tryLocks failed (first: %v); Redisson's never fail on a shared read lock", rounds.Load(), unlockErrs.Load(), lockErrs.Load(), first.Load())
	}
}

var _ = errors.Is
var _ = strings.HasPrefix

// TestZZRWUnlockLatchAnswersForPartialDelete: the last reader A's unlock
// (3.24.0+, with the unlock latch) compare-and-deletes the value; the
// delete lands on master 1 only, because another reader B's join (through
// another proxy, whose own write to master 1 is slow) changed masters 2
// and 3 first — B is granted there. The unlock's retry (a56aa19) then
// reads its own latch "1" from master 1 and answers 1, "released", with
// no change at the quorum: masters 2 and 3 still list A, whose watchdog
// Redisson has now cancelled. Expected: the retry sees {A,B} at the
// quorum, removes A and answers 0 (what Redisson answers when B's join
// came first).
func TestZZRWUnlockLatchAnswersForPartialDelete(t *testing.T) {
	set := startEnv(t, 3, nil).set
	relays, raddrs := startRelays(t, set.Addrs())
	e := startEnvOn(t, set, func(c *Config) {
		c.EngineConfig.Addrs = raddrs
		c.EngineConfig.MasterTimeout = 3 * time.Second
	})
	prof := redissonwire.Profiles[0] // 3.44.0 read unlock: the latch
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "zzrw-latch"
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

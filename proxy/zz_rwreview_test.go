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

package engine_test

// A fair lock's queue keys: their TTLs are only raised, whatever other
// waiters' timeouts (the ticket counter's: TestFairRegisterKeepsCounterTTL);
// distinct locks have distinct queues; on cluster members a key with a
// stray brace is refused up front or works, never failing CROSSSLOT.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// fairQueueCount returns ZCARD of key's fair queue on every master.
func fairQueueCount(v *env, key string) []int64 {
	out := make([]int64, len(v.direct))
	for i := range v.direct {
		r, err := v.exec(i, "ZCARD", "redlock:fair:{"+key+"}:"+key+":queue")
		if err != nil {
			out[i] = -1
			continue
		}
		out[i] = r.Int
	}
	return out
}

// The queue's keys got the TTL of the last writer's waiter timeout, for
// every waiter: a waiter with a short timeout (another process) shortened
// the queue's life below the entries of waiters with a long one, and the
// whole queue expired between the long waiter's tries. TTLs are now only
// raised.
//
// Found by the adversarial review of engine.FairLock (issue #34): it
// failed on the first version.
func TestFairLockMixedWaiterTimeouts(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := keyName(t)
	long, err := v.e.NewFairLock(key, 12*time.Second) // tries every 2s..4s (retry delay capped at 2s)
	if err != nil {
		t.Fatal(err)
	}
	short, err := v.e.NewFairLock(key, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := long.TryLock(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() {
		l, err := long.Lock(ctx, 5*time.Second, engine.WithRetryDelay(2*time.Second))
		if err == nil {
			l.Unlock(ctx)
		}
		aDone <- err
	}()
	time.Sleep(200 * time.Millisecond) // A arrived
	bctx, bcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = short.Lock(bctx, 5*time.Second) // B queues behind A, tries, gives up
	bcancel()
	if err == nil {
		t.Fatal("B got the lock while it was held")
	}
	// A waits (its tries are seconds apart); its entry should stay for 12s.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for {
		n := fairQueueCount(v, key)
		empty := 0
		for _, c := range n {
			if c == 0 {
				empty++
			}
		}
		if empty >= v.e.Quorum() {
			t.Logf("queue sizes %v: A's entry gone from a quorum while A is still waiting", n)
			break
		}
		if time.Now().After(deadline) {
			t.Logf("A's entry kept: %v", n)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	holder.Unlock(ctx)
	l, err := long.TryLock(ctx, 5*time.Second)
	if err == nil {
		l.Unlock(ctx)
		t.Fatal("TryLock granted ahead of a queued Lock waiter (A, waiter timeout 12s, still trying): another process's short waiter timeout expired the queue")
	}
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
}

// Distinct fair locks "K" and "{K}" shared one queue (both mapped to
// redlock:fair:{K}): a waiter of one blocked the other, which was free.
//
// Found by the adversarial review of engine.FairLock (issue #34): it
// failed on the first version.
func TestFairLockQueueNames(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := v.e.NewFairLock("zzk", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.e.NewFairLock("{zzk}", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := a.TryLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock(ctx)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go a.Lock(wctx, time.Second) // waits for "zzk"
	queued2 := func() bool {
		n := 0
		for _, c := range fairQueueCount(v, "zzk") {
			if c >= 1 {
				n++
			}
		}
		return n >= v.e.Quorum()
	}
	for deadline := time.Now().Add(5 * time.Second); !queued2(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("waiter not queued")
		}
	}
	l, err := b.TryLock(ctx, time.Second)
	if err != nil {
		t.Fatalf("TryLock of the free fair lock {zzk} (nobody holds or waits for it): %v — it sees the queue of the fair lock zzk", err)
	}
	l.Unlock(ctx)
}

// With cluster members, a key with a '}' and no hash tag (a}b) passed
// NewFairLock's check, but its queue keys got another hash slot than the
// lock key's, so every script was CROSSSLOT: such keys are now refused.
//
// Found by the adversarial review of engine.FairLock (issue #34): it
// failed on the first version.
func TestFairLockClusterBraceKey(t *testing.T) {
	v := newClusterEnv(t, 3, 3, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, key := range []string{"zz}b", "{}zz"} {
		fl, err := v.e.NewFairLock(key, 5*time.Second)
		if err != nil {
			if errors.Is(err, engine.ErrBadArgument) {
				continue // refused up front: fine
			}
			t.Fatal(err)
		}
		l, err := fl.TryLock(ctx, 5*time.Second)
		if err != nil {
			t.Errorf("key %q: NewFairLock accepted it, TryLock of the free key: %v", key, err)
			continue
		}
		l.Unlock(ctx)
	}
}

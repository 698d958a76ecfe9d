package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestUnlockKicksHeadMidTry: when a lock of this engine is unlocked while
// the head of its key's queue is in the middle of an attempt of its own
// (begun before the release, so refused), the head tries again as soon
// as that attempt fails — without reading the masters' PTTL first, and
// without waiting for the retry delay. Here the head's attempt is held at
// its decision (refused: the holder has the key) while the holder unlocks.
func TestUnlockKicksHeadMidTry(t *testing.T) {
	set := mastertest.Start(t, 5)
	e, err := New(Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	const key = "kick:mid-try"
	holder, err := e.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pttls := func() (n int) {
		for i := range e.n {
			r, err := e.conns[i][0].Exec(ctx, "INFO", "commandstats")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(r.Str), "cmdstat_pttl:") {
				n++
			}
		}
		return n
	}
	var armed atomic.Bool
	armed.Store(true)
	hook := func(o *op) {
		if o.e == e && o.key == key && o.role == roleAcquire && armed.CompareAndSwap(true, false) {
			// The head's own attempt, decided (refused): the holder
			// unlocks before the head learns it.
			holder.UnlockAsync(func(error) {})
		}
	}
	decideHook.Store(&hook)
	t.Cleanup(func() { decideHook.Store(nil) })
	start := time.Now()
	l, err := e.Lock(ctx, key, 10*time.Second, WithRetryDelay(5*time.Second))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	defer l.Unlock(ctx)
	if armed.Load() {
		t.Fatal("the head's own attempt was never decided")
	}
	if n := pttls(); n != 0 {
		t.Errorf("%d masters were asked PTTL: the head read the holder's TTL after a release of this engine", n)
	}
	if took > 2*time.Second {
		t.Errorf("Lock took %v: the head waited instead of trying again at once", took)
	}
}

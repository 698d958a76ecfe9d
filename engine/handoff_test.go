package engine_test

// The FIFO hand-off: an attempt begun by Unlock for a waiter elsewhere is
// judged at its decision, and Lock returns it only while it is valid.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// pauseOnRefusal stops master 4 when the armed acquisition attempt ends
// refused, then (on its own goroutine, 50 ms later) runs after.
type pauseOnRefusal struct {
	engine.NopObserver
	armed atomic.Bool
	v     atomic.Pointer[env]
	after atomic.Value // func()
}

func (o *pauseOnRefusal) Acquire(ev engine.AcquireEvent) {
	if ev.Result != engine.AcquireGranted && o.armed.CompareAndSwap(true, false) {
		o.v.Load().set.Masters()[4].Pause()
		f := o.after.Load().(func())
		go func() { time.Sleep(50 * time.Millisecond); f() }()
	}
}

// TestHandOffCollectedLate: the FIFO hand-off's attempt (begun by
// Unlock in waitRoom.released with the waiter elsewhere) is now judged at
// its decision, on the master's reader (acquisition.judge); the waiter
// collects it with finish whenever it comes back to its loop, and finish
// returns a.res without looking at the clock. Before ff74085 finish ran
// the verdict when the waiter collected the attempt. Here the waiter is in
// holdLeft (its PTTL broadcast waits for a stopped master, 1 s) when the
// holder unlocks; the hand-off attempt of a 300 ms lock is granted at
// once, and Lock returns it about a second later, long expired.
//
// Found by the adversarial review of TryLockAsync (the acquisition as a
// callback chain): it failed before its fix.
func TestHandOffCollectedLate(t *testing.T) {
	obs := &pauseOnRefusal{}
	cfg := functional // MasterTimeout 1 s
	cfg.Observer = obs
	v := newEnv(t, 5, cfg)
	obs.v.Store(v)
	t.Cleanup(func() { v.set.Masters()[4].Resume() })
	ctx := context.Background()
	key := keyName(t)

	holder := v.mustLock(key, 10*time.Second)
	obs.after.Store(func() { holder.Unlock(context.Background()) })
	obs.armed.Store(true)

	start := time.Now()
	l, err := v.e.Lock(ctx, key, 300*time.Millisecond)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	defer l.Unlock(ctx)
	t.Logf("Lock returned after %v: Valid %v, Remaining %v", took, l.Valid(), l.Remaining())
	if !l.Valid() {
		t.Errorf("Lock returned a lock that is not valid at return (Remaining %v, TTL 300ms, returned after %v): grant rule (c)", l.Remaining(), took)
		if l2, err := v.e.TryLock(ctx, key, 5*time.Second); err == nil {
			t.Errorf("and another TryLock of the key succeeds at once (token %q)", l2.Token())
			l2.Unlock(ctx)
		}
	}
}

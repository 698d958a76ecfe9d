package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// TestCancelledAcquisitionNotReused: an acquisition whose context ends
// before its decision is cancelled; its result waits for every master's
// answer and its cleanup. The decision itself, made on the master
// connection of the quorum-th answer, may reach it later still (it finds
// it was cancelled first). Before, finish returned the acquisition to the
// pool at once: the late decision then ran on a reset (or reused)
// acquisition — a nil engine here, so the reader panicked (CI's race run
// caught the write behind it, in the fault suite's fairlock row). Here the
// decision is held back until the cancelled TryLock returned.
func TestCancelledAcquisitionNotReused(t *testing.T) {
	set := mastertest.Start(t, 5)
	e, err := New(Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	returned := make(chan struct{})
	late := make(chan struct{})
	hook := func(o *op) {
		if o.e == e && o.acq != nil && o.role == roleAcquire {
			<-returned // the cancelled TryLock returned first
			defer close(late)
		}
	}
	decideHook.Store(&hook)
	t.Cleanup(func() { decideHook.Store(nil) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = e.TryLock(ctx, "cancel:reuse", 10*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLock: %v, want the context's deadline", err)
	}
	decideHook.Store(nil)
	close(returned)
	select {
	case <-late: // the late decision ran, and found the attempt cancelled
	case <-time.After(5 * time.Second):
		t.Fatal("the held-back decision never ran")
	}
	// The engine still works, and the key was cleaned up.
	l, err := e.TryLock(context.Background(), "cancel:reuse", 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock after: %v", err)
	}
	l.Unlock(context.Background())
}

// TestAsyncCancelBeforeLateWatch: TryLockAsync's context ends before the
// decision, but the goroutine of its context watch runs late (the
// runtime's choice; a loaded CI machine): the attempt still ends with the
// context's error, not with a lock. Before, the decision won the race
// with the watch and returned a lock the caller had cancelled
// (TestTryLockAsyncCancel failed so in a CI run).
func TestAsyncCancelBeforeLateWatch(t *testing.T) {
	set := mastertest.Start(t, 5)
	e, err := New(Config{FreshMasters: true, Addrs: set.Addrs(), MasterTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	hook := func() { <-release }
	watchHook.Store(&hook)
	t.Cleanup(func() { watchHook.Store(nil) })
	ms := set.Masters()
	for _, i := range []int{2, 3, 4} {
		if err := ms[i].Pause(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	type res struct {
		l   *Lock
		err error
	}
	ch := make(chan res, 1)
	e.TryLockAsync(ctx, "late-watch", 10*time.Second, func(l *Lock, err error) { ch <- res{l, err} })
	time.Sleep(100 * time.Millisecond)
	cancel()
	for _, i := range []int{2, 3, 4} {
		if err := ms[i].Resume(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the quorum answers meanwhile
	close(release)
	select {
	case r := <-ch:
		if r.l != nil || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled before the decision: lock %v, %v; want context.Canceled", r.l != nil, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("done not called")
	}
}

package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/check"
)

// asyncResult is one TryLockAsync's result.
type asyncResult struct {
	l   *engine.Lock
	err error
}

// tryAsync runs TryLockAsync and waits for its result.
func tryAsync(t *testing.T, e *engine.Engine, ctx context.Context, key string, ttl time.Duration, opts ...engine.Option) asyncResult {
	t.Helper()
	return callOnce(t, fmt.Sprintf("TryLockAsync(%q)", key), func(done func(asyncResult)) {
		e.TryLockAsync(ctx, key, ttl, func(l *engine.Lock, err error) { done(asyncResult{l, err}) }, opts...)
	})
}

// callOnce runs start with a done and returns what done got; it fails the
// test when done is not called within 10s, or is called twice.
func callOnce[T any](t *testing.T, what string, start func(done func(T))) T {
	t.Helper()
	ch := make(chan T, 2)
	start(func(v T) { ch <- v })
	var r T
	select {
	case r = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: done not called within 10s", what)
	}
	select {
	case r2 := <-ch:
		t.Fatalf("%s: done called twice (%v, then %v)", what, r, r2)
	case <-time.After(50 * time.Millisecond):
	}
	return r
}

// TestTryLockAsync: the asynchronous acquisition answers as TryLock does —
// a valid lock, ErrNotAcquired on a held key with nothing of the attempt
// left behind, ErrUnavailable with three of five masters gone, argument
// errors before it returns — and its done runs on the goroutine that
// completes the attempt, not on the caller's.
func TestTryLockAsync(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 100 * time.Millisecond
	v := newEnv(t, 5, cfg)
	ctx := context.Background()

	r := tryAsync(t, v.e, ctx, "async:a", 5*time.Second)
	if r.err != nil || r.l == nil || !r.l.Valid() {
		t.Fatalf("free key: %v, %v; want a valid lock", r.l, r.err)
	}
	v.waitHeld("async:a", r.l.Token()) // granted by a quorum: the others may answer later

	held := tryAsync(t, v.e, ctx, "async:a", 5*time.Second)
	if !errors.Is(held.err, engine.ErrNotAcquired) || held.l != nil {
		t.Fatalf("held key: %v, %v; want ErrNotAcquired", held.l, held.err)
	}
	if qe := quorumError(t, held.err); qe.Held != 5 {
		t.Fatalf("held key: %d masters answered held; want 5 (%v)", qe.Held, held.err)
	}
	if err := r.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Argument errors arrive before TryLockAsync returns.
	for _, tc := range []struct {
		key  string
		ttl  time.Duration
		opts []engine.Option
	}{{"", time.Second, nil}, {"k", 0, nil}, {"k", time.Hour, nil}, {"k", time.Second, []engine.Option{engine.WithMaxTries(2)}}} {
		called := false
		v.e.TryLockAsync(ctx, tc.key, tc.ttl, func(l *engine.Lock, err error) {
			called = true
			if !errors.Is(err, engine.ErrBadArgument) {
				t.Errorf("TryLockAsync(%q, %v): %v; want ErrBadArgument", tc.key, tc.ttl, err)
			}
		}, tc.opts...)
		if !called {
			t.Errorf("TryLockAsync(%q, %v): done not called before it returned", tc.key, tc.ttl)
		}
	}

	// done runs where the attempt completes: TryLockAsync has returned
	// by then (a done run on the caller's goroutine would wait here until
	// the timeout).
	returned := make(chan struct{})
	ch := make(chan bool, 1)
	v.e.TryLockAsync(ctx, "async:b", 5*time.Second, func(l *engine.Lock, err error) {
		select {
		case <-returned:
			ch <- err == nil
		case <-time.After(2 * time.Second):
			ch <- false
		}
		if l != nil {
			go l.Unlock(context.Background()) // not on the reader
		}
	})
	close(returned)
	if !<-ch {
		t.Fatal("done ran before TryLockAsync returned, or the grant failed")
	}

	// Fenced: the token is written back before done sees the lock.
	f1 := tryAsync(t, v.e, ctx, "async:f", 5*time.Second, engine.WithFencing())
	if f1.err != nil {
		t.Fatal(f1.err)
	}
	f1.l.Unlock(ctx)
	f2 := tryAsync(t, v.e, ctx, "async:f", 5*time.Second, engine.WithFencing())
	if f2.err != nil || f2.l.FencingToken() <= f1.l.FencingToken() {
		t.Fatalf("second fenced grant: token %d after %d, %v; want a larger token", f2.l.FencingToken(), f1.l.FencingToken(), f2.err)
	}
	f2.l.Unlock(ctx)

	killMasters(v, []int{1, 2, 3})
	un := tryAsync(t, v.e, ctx, "async:c", 5*time.Second)
	if !errors.Is(un.err, engine.ErrUnavailable) {
		t.Fatalf("3 of 5 masters down: %v; want ErrUnavailable", un.err)
	}
	for _, i := range []int{0, 4} {
		if r := v.mustExec(i, "EXISTS", "async:c"); r.Int != 0 {
			t.Fatalf("failed attempt left its key on master %d", i)
		}
	}
}

// TestTryLockAsyncCancel: a context that ends before the decision ends
// the attempt with ctx's error, after the cleanup — nothing of it stays
// on the masters that granted — and a context that ends after the
// result changes nothing.
func TestTryLockAsyncCancel(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 2 * time.Second
	v := newEnv(t, 5, cfg)
	v.pause(2, 3, 4) // two grants, no decision until they answer or time out
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan asyncResult, 1)
	start := time.Now()
	v.e.TryLockAsync(ctx, "async:cancel", 10*time.Second, func(l *engine.Lock, err error) { ch <- asyncResult{l, err} })
	time.Sleep(100 * time.Millisecond)
	cancel()
	v.resume(2, 3, 4) // the answers come, then the cleanup
	select {
	case r := <-ch:
		if !errors.Is(r.err, context.Canceled) || r.l != nil {
			// With three of five masters stopped no quorum can answer
			// before the cancel: say which masters hold the key.
			time.Sleep(100 * time.Millisecond)
			t.Fatalf("cancelled: lock %v, err %v; want context.Canceled (masters' values after resuming: %q)", r.l != nil, r.err, v.values("async:cancel"))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled attempt: done not called")
	}
	if d := time.Since(start); d > 1900*time.Millisecond {
		t.Fatalf("cancelled attempt took %v: it waited for the per-master timeout", d)
	}
	v.waitGone("async:cancel", 2*time.Second)

	// Cancelled after the grant: the lock stands.
	ctx2, cancel2 := context.WithCancel(context.Background())
	ok := make(chan *engine.Lock, 1)
	v.e.TryLockAsync(ctx2, "async:later", 10*time.Second, func(l *engine.Lock, err error) { ok <- l })
	l := <-ok
	cancel2()
	time.Sleep(50 * time.Millisecond)
	if l == nil || !l.Valid() || l.Err() != nil {
		t.Fatalf("a context ended after the grant: %v; want the lock to stand", l)
	}
	v.waitHeld("async:later", l.Token()) // the lock stands on every master
	l.Unlock(context.Background())
}

// TestTryLockAsyncNoGoroutines: thousands of asynchronous acquisitions in
// flight at once need no goroutine each — the blocking TryLock would need
// one per attempt.
func TestTryLockAsyncNoGoroutines(t *testing.T) {
	v := newEnv(t, 3, functional)
	const n = 3000
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	var granted, peak atomic.Int64
	wg.Add(n)
	for i := range n {
		v.e.TryLockAsync(context.Background(), keyName(t, i), 10*time.Second, func(l *engine.Lock, err error) {
			defer wg.Done()
			if err == nil {
				granted.Add(1)
			}
		})
		if i%100 == 0 {
			if g := int64(runtime.NumGoroutine()); g > peak.Load() {
				peak.Store(g)
			}
		}
	}
	wg.Wait()
	if granted.Load() != n {
		t.Fatalf("%d of %d distinct keys granted", granted.Load(), n)
	}
	if extra := peak.Load() - int64(base); extra > 50 {
		t.Fatalf("%d goroutines beyond the %d before, with %d acquisitions in flight; want none per acquisition", extra, base, n)
	}
}

// TestUnlockAsync: the asynchronous release answers as Unlock does — nil
// and the key gone, ErrUnlocked the second time, ErrLockLost matching
// ErrUnavailable with three of five masters gone — on the goroutine that
// completes it.
func TestUnlockAsync(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 100 * time.Millisecond
	v := newEnv(t, 5, cfg)
	unlock := func(l *engine.Lock) error {
		t.Helper()
		return callOnce(t, "UnlockAsync", func(done func(error)) { l.UnlockAsync(done) })
	}
	l := v.mustLock("unlockasync:a", 5*time.Second)
	if err := unlock(l); err != nil {
		t.Fatalf("UnlockAsync: %v", err)
	}
	// UnlockAsync answers at a quorum; the last master's release may
	// follow.
	check.Eventually(t, 5*time.Second, "the released lock gone from every master", func() bool {
		return countOf(v.values("unlockasync:a"), l.Token()) == 0
	})
	if err := unlock(l); !errors.Is(err, engine.ErrUnlocked) {
		t.Fatalf("second UnlockAsync: %v; want ErrUnlocked", err)
	}

	// done runs where the release completes, after UnlockAsync returned.
	l = v.mustLock("unlockasync:b", 5*time.Second)
	returned := make(chan struct{})
	ok := make(chan bool, 1)
	l.UnlockAsync(func(err error) {
		select {
		case <-returned:
			ok <- err == nil
		case <-time.After(2 * time.Second):
			ok <- false
		}
	})
	close(returned)
	if !<-ok {
		t.Fatal("done ran before UnlockAsync returned, or the release failed")
	}

	l = v.mustLock("unlockasync:c", 5*time.Second)
	killMasters(v, []int{0, 2, 4})
	err := unlock(l)
	if !errors.Is(err, engine.ErrLockLost) || !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("3 of 5 masters down: %v; want ErrLockLost and ErrUnavailable", err)
	}
	if qe := quorumError(t, err); qe.Granted != 2 {
		t.Fatalf("Granted %d; want the two masters up (it waits for every answer): %v", qe.Granted, err)
	}
}

// TestExtendAsync: the asynchronous extension answers as Extend does: the
// deadline moves on success, a bad TTL is refused before it returns, an
// unlocked lock answers ErrUnlocked, and a quorum that no longer holds
// the token ends the lock with ErrLockLost.
func TestExtendAsync(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 100 * time.Millisecond
	v := newEnv(t, 5, cfg)
	extend := func(l *engine.Lock, ttl time.Duration) error {
		t.Helper()
		return callOnce(t, "ExtendAsync", func(done func(error)) { l.ExtendAsync(ttl, done) })
	}
	l := v.mustLock("extendasync:a", time.Second)
	if err := extend(l, 20*time.Second); err != nil {
		t.Fatalf("ExtendAsync: %v", err)
	}
	if left := l.Remaining(); left < 10*time.Second {
		t.Fatalf("%v left after extending to 20s", left)
	}
	// ExtendAsync answers at a quorum; the last master's extension may
	// follow.
	check.Eventually(t, 5*time.Second, "every master's PTTL at 10s or more after extending to 20s", func() bool {
		return slices.Min(v.pttls("extendasync:a")) >= 10000
	})
	if err := extend(l, 0); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("ExtendAsync(0): %v; want ErrBadArgument", err)
	}
	for i := range 5 {
		v.mustExec(i, "SET", "extendasync:a", "someone-else")
	}
	if err := extend(l, 20*time.Second); !errors.Is(err, engine.ErrLockLost) || errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("ExtendAsync of a lock taken over: %v; want ErrLockLost, not unavailable", err)
	}
	select {
	case <-l.Done():
	case <-time.After(time.Second):
		t.Fatal("the lock did not end after a quorum said it no longer holds the token")
	}
	l2 := v.mustLock("extendasync:b", 5*time.Second)
	l2.Unlock(context.Background())
	if err := extend(l2, 5*time.Second); !errors.Is(err, engine.ErrUnlocked) {
		t.Fatalf("ExtendAsync after Unlock: %v; want ErrUnlocked", err)
	}
}

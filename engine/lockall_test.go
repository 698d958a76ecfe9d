package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

func TestLockAll(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	s, err := v.e.TryLockAll(ctx, []string{"all:b", "all:a", "all:b", "all:c"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range s.Locks() {
		keys = append(keys, l.Key())
		v.waitHeld(l.Key(), l.Token())
	}
	if !slices.Equal(keys, []string{"all:a", "all:b", "all:c"}) {
		t.Fatalf("keys %v; want sorted, once each", keys)
	}
	// All or none: d is free, c is held, so d is not left held.
	_, err = v.e.TryLockAll(ctx, []string{"all:d", "all:c"}, 5*time.Second)
	if !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("overlapping set: %v; want ErrNotAcquired", err)
	}
	v.waitGone("all:d", 5*time.Second)
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		v.waitGone(k, 5*time.Second)
	}
	if _, err := v.e.TryLockAll(ctx, nil, time.Second); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("no keys: %v", err)
	}
	if _, err := v.e.TryLockAll(ctx, []string{"a", ""}, time.Second); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("an empty key: %v", err)
	}
}

// TestLockAllNoDeadlock: two callers taking overlapping sets listed in
// opposite orders, each set held while the other waits, both finish.
func TestLockAllNoDeadlock(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sets := [][]string{{"dl:x", "dl:y", "dl:z"}, {"dl:z", "dl:y", "dl:x"}}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, set := range sets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				// The TTL outlasts the test: only order avoids a deadlock.
				s, err := v.e.LockAll(ctx, set, 30*time.Second, engine.WithRetryDelay(time.Millisecond))
				if err != nil {
					errs[i] = err
					return
				}
				time.Sleep(100 * time.Microsecond)
				if err := s.Unlock(ctx); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
}

// TestLockAllDone: the set ends when its first lock does, and LockAll
// starts again when a lock it holds ends while it waits for a later key.
func TestLockAllDone(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	s, err := v.e.TryLockAll(ctx, []string{"done:a", "done:b"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := s.Context(ctx)
	defer cancel()
	for i := range 5 {
		v.mustExec(i, "DEL", "done:b")
	}
	if err := s.Extend(ctx, 5*time.Second); !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("Extend with done:b deleted: %v; want ErrLockLost", err)
	}
	select {
	case <-s.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed after a lock was lost")
	}
	if err := s.Err(); !errors.Is(err, engine.ErrLockLost) {
		t.Fatalf("Err: %v", err)
	}
	<-lctx.Done()
	if !errors.Is(context.Cause(lctx), engine.ErrLockLost) {
		t.Fatalf("context cause %v", context.Cause(lctx))
	}
	s.Unlock(ctx)

	// done:y held elsewhere for 700ms; LockAll(x, y) with a 200ms TTL
	// takes x, whose validity runs out while it waits: it starts again,
	// and returns with both valid.
	other, err := v.e.TryLock(ctx, "done:y", 700*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	s, err = v.e.LockAll(wctx, []string{"done:x", "done:y"}, 200*time.Millisecond, engine.WithRetryDelay(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if other.Valid() {
		t.Fatal("LockAll returned while the other holder was valid")
	}
	if !s.Valid() {
		t.Fatalf("the set is not valid: %v", s.Err())
	}
	if st := v.e.Stats(); st.Acquired < 6 { // 2 + 1 + done:x twice or more + done:y
		t.Fatalf("%d acquisitions: done:x was not taken again after its validity ran out", st.Acquired)
	}
}

// slowGrants is an Observer that holds up the first granted acquisition's
// goroutine for pause (a GC pause, a slow scheduler, slow masters for the
// next key: taking a set's later keys outlasts an earlier key's validity).
type slowGrants struct {
	engine.NopObserver
	pause time.Duration
	once  sync.Once
}

func (o *slowGrants) Acquire(ev engine.AcquireEvent) {
	if ev.Result == engine.AcquireGranted {
		o.once.Do(func() { time.Sleep(o.pause) })
	}
}

// TestLockAllValidAtReturn: TryLockAll returns a set only if every lock
// in it is valid once the last key is taken (the grant rule's (c),
// checked last); otherwise it releases all and says why. Before, it
// returned a set whose first lock's validity had run out while the later
// keys were taken (200 keys at a 20 ms TTL: nil error with up to 38 locks
// already invalid), and a second engine took the key at once. LockAll,
// seeing its first lock end while it takes the next, starts again.
func TestLockAllValidAtReturn(t *testing.T) {
	ctx := context.Background()
	cfg := functional
	cfg.Observer = &slowGrants{pause: 150 * time.Millisecond}
	v := newEnv(t, 5, cfg)
	keys := []string{keyName(t, "a"), keyName(t, "b")}
	s, err := v.e.TryLockAll(ctx, keys, 100*time.Millisecond)
	if err == nil {
		t.Fatalf("TryLockAll returned a set whose first lock ran out while the second was taken (valid: %v)", s.Valid())
	}
	if !errors.Is(err, engine.ErrNotAcquired) || !errors.Is(err, engine.ErrExpired) && !errors.Is(err, engine.ErrGrantedTooLate) {
		t.Fatalf("TryLockAll: %v; want ErrNotAcquired, and ErrExpired or ErrGrantedTooLate", err)
	}
	for _, k := range keys {
		v.waitGone(k, 5*time.Second)
	}
	// The rule is no obstacle where the TTL allows: the pause is spent,
	// the same keys are granted at once.
	if s, err = v.e.TryLockAll(ctx, keys, 5*time.Second); err != nil || !s.Valid() {
		t.Fatalf("TryLockAll after the pause: %v", err)
	}
	s.Unlock(ctx)

	cfg.Observer = &slowGrants{pause: 150 * time.Millisecond}
	v = newEnv(t, 5, cfg)
	s, err = v.e.LockAll(ctx, keys, 100*time.Millisecond)
	if err != nil || !s.Valid() {
		t.Fatalf("LockAll: %v; want a valid set (it starts again when its first lock ends)", err)
	}
	s.Unlock(ctx)
}

// slowExtends is an Observer that, once armed, holds up the goroutine of
// the next successful extension for pause.
type slowExtends struct {
	engine.NopObserver
	pause time.Duration
	armed atomic.Bool
}

func (o *slowExtends) Extend(ok, auto bool) {
	if ok && !auto && o.armed.CompareAndSwap(true, false) {
		time.Sleep(o.pause)
	}
}

// TestLockSetExtendValidAtReturn: LockSet.Extend returns nil only if
// every lock is valid once the last is extended (the grant rule's (c),
// checked last). Before, a pause between keys (here 150 ms after the
// first of two 100 ms extensions) returned nil with the first lock
// expired; found by the review of issue #30 (200 keys extended to 20 ms:
// nil with up to 74 locks invalid).
func TestLockSetExtendValidAtReturn(t *testing.T) {
	cfg := functional
	obs := &slowExtends{pause: 150 * time.Millisecond}
	cfg.Observer = obs
	v := newEnv(t, 5, cfg)
	ctx := context.Background()
	s, err := v.e.TryLockAll(ctx, []string{keyName(t, "a"), keyName(t, "b")}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unlock(ctx)
	obs.armed.Store(true)
	err = s.Extend(ctx, 100*time.Millisecond)
	if err == nil {
		t.Fatalf("Extend returned nil with the first lock expired (valid: %v)", s.Valid())
	}
	if !errors.Is(err, engine.ErrLockLost) || !errors.Is(err, engine.ErrExpired) && !errors.Is(err, engine.ErrGrantedTooLate) {
		t.Fatalf("Extend: %v; want ErrLockLost, and ErrExpired or ErrGrantedTooLate", err)
	}
}

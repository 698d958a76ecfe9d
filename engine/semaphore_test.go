package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

func TestSemaphore(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	s, err := v.e.NewSemaphore("sem", 3)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var permits []*engine.Lock
	for range 3 {
		l, err := s.TryAcquire(ctx, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if keys[l.Key()] {
			t.Fatalf("permit %s handed out twice", l.Key())
		}
		keys[l.Key()] = true
		permits = append(permits, l)
	}
	for i := range 3 {
		if !keys[s.PermitKey(i)] {
			t.Fatalf("permit key %s not among %v", s.PermitKey(i), keys)
		}
	}
	if _, err := s.TryAcquire(ctx, 5*time.Second); !errors.Is(err, engine.ErrNotAcquired) {
		t.Fatalf("a fourth permit of 3: %v; want ErrNotAcquired", err)
	}
	h, err := v.e.Holder(ctx, permits[1].Key())
	if err != nil || h.Token != permits[1].Token() {
		t.Fatalf("Holder(%s) = %+v, %v; want the permit's token", permits[1].Key(), h, err)
	}
	if err := permits[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := s.TryAcquire(ctx, 5*time.Second)
	if err != nil || l.Key() != permits[1].Key() {
		t.Fatalf("after an Unlock: %v, permit %v; want %s", err, l, permits[1].Key())
	}
}

// TestSemaphoreExpiry: a holder that never releases (crashed) gives its
// permit back when its TTL ends; a waiting Acquire gets it then, not
// before.
func TestSemaphoreExpiry(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	s, _ := v.e.NewSemaphore("sem:exp", 2)
	var until time.Time
	for range 2 {
		l, err := s.TryAcquire(ctx, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		until = l.Until()
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := s.Acquire(wctx, time.Second, engine.WithRetryDelay(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(until) {
		t.Fatalf("a third permit granted %v before the crashed holders' validity ended", time.Until(until))
	}
	if !l.Valid() {
		t.Fatal("the permit is not valid")
	}
}

// TestSemaphoreContention: 12 goroutines on 3 permits never have more
// than 3 valid holders inside at once.
func TestSemaphoreContention(t *testing.T) {
	v := newEnv(t, 5, functional)
	s, _ := v.e.NewSemaphore("sem:hot", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var inside, most, total atomic.Int64
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for total.Load() < 600 && ctx.Err() == nil {
				l, err := s.Acquire(ctx, 2*time.Second, engine.WithRetryDelay(time.Millisecond))
				if err != nil {
					continue
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				total.Add(1)
				l.Unlock(ctx)
			}
		}()
	}
	wg.Wait()
	if total.Load() < 600 {
		t.Fatalf("only %d acquisitions in 20s", total.Load())
	}
	if most.Load() > 3 {
		t.Fatalf("%d holders inside at once with 3 permits", most.Load())
	}
	if most.Load() < 2 {
		t.Fatalf("at most %d holder inside at once: the permits were not shared", most.Load())
	}
}

func TestSemaphoreBadArguments(t *testing.T) {
	v := newEnv(t, 3, functional)
	for _, p := range []int{0, -1, engine.MaxPermits + 1} {
		if _, err := v.e.NewSemaphore("s", p); !errors.Is(err, engine.ErrBadArgument) {
			t.Fatalf("permits %d: %v; want ErrBadArgument", p, err)
		}
	}
	if _, err := v.e.NewSemaphore("", 1); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("empty key: %v", err)
	}
	s, _ := v.e.NewSemaphore("s", 2)
	ctx := context.Background()
	if _, err := s.TryAcquire(ctx, time.Second, engine.WithMaxTries(2)); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("TryAcquire with a wait option: %v", err)
	}
	if _, err := s.TryAcquire(ctx, time.Second, engine.WithToken("x")); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("TryAcquire with a token: %v", err)
	}
}

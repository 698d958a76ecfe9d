package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/redlock-dev/redlock/engine"
)

// TestMutualExclusion runs many goroutines contending for few keys and
// checks with an in-process detector that no two holders of the same key
// are ever inside their critical sections at once.
func TestMutualExclusion(t *testing.T) {
	const (
		goroutines = 64
		keys       = 16
		ttl        = 30 * time.Second
	)
	target := int64(20000)
	// The per-master timeout is generous: this test is about exclusion, not
	// latency, and a loaded machine must not turn into spurious failures.
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()

	type section struct {
		inside atomic.Int32
		holder atomic.Pointer[engine.Lock]
		count  atomic.Int64
	}
	var sections [keys]section
	var acquired, overlaps, invalid atomic.Int64
	before := v.e.Stats()
	start := time.Now()

	g, gctx := errgroup.WithContext(ctx)
	for w := range goroutines {
		k := w % keys
		key := fmt.Sprintf("mutex-%d", k)
		s := &sections[k]
		g.Go(func() error {
			for acquired.Load() < target {
				l, err := v.e.Lock(gctx, key, ttl, engine.WithRetryDelay(500*time.Microsecond))
				if err != nil {
					if errors.Is(err, context.Canceled) && acquired.Load() >= target {
						return nil
					}
					return fmt.Errorf("Lock(%s) after %d acquisitions: %w", key, acquired.Load(), err)
				}
				// Critical section: the counter must go 0 -> 1, never 2.
				if n := s.inside.Add(1); n != 1 {
					overlaps.Add(1)
				}
				if !s.holder.CompareAndSwap(nil, l) {
					overlaps.Add(1)
				}
				if !l.Valid() {
					invalid.Add(1)
				}
				runtime.Gosched()
				s.count.Add(1)
				if !s.holder.CompareAndSwap(l, nil) {
					overlaps.Add(1)
				}
				s.inside.Add(-1)
				acquired.Add(1)
				if err := l.Unlock(gctx); err != nil {
					return fmt.Errorf("Unlock(%s): %w", key, err)
				}
			}
			return nil
		})
	}
	err := g.Wait()
	elapsed := time.Since(start)
	st := v.e.Stats()
	t.Logf("%d acquisitions in %v (%.0f/s), %d failed attempts, %d released, %d lost",
		acquired.Load(), elapsed.Round(time.Millisecond), float64(acquired.Load())/elapsed.Seconds(),
		st.Failed-before.Failed, st.Released-before.Released, st.Lost-before.Lost)
	if err != nil {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping critical sections", n)
	}
	if n := invalid.Load(); n != 0 {
		t.Errorf("%d holders saw Valid() == false inside the critical section", n)
	}
	if n := acquired.Load(); n < target {
		t.Fatalf("%d acquisitions, want >= %d", n, target)
	}
	for k := range sections {
		if sections[k].count.Load() == 0 {
			t.Errorf("key %d was never acquired", k)
		}
	}
	if got := st.Acquired - before.Acquired; got != uint64(acquired.Load()) {
		t.Errorf("Stats().Acquired grew by %d, want %d", got, acquired.Load())
	}
	if got := st.Released - before.Released; got != uint64(acquired.Load()) {
		t.Errorf("Stats().Released grew by %d, want %d", got, acquired.Load())
	}
}

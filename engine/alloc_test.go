package engine_test

import (
	"context"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestAllocs bounds the allocations of a TryLock+Unlock cycle on a warm
// engine, counted over the whole process (connection goroutines included),
// and checks that options add none (an Option is a value).
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	v := newEnv(t, 5, engine.Config{FreshMasters: true, MasterTimeout: time.Second})
	ctx := context.Background()
	var failed atomic.Int64
	measure := func(opts ...engine.Option) float64 {
		cycle := func() {
			l, err := v.e.TryLock(ctx, "allocs", 10*time.Second, opts...)
			if err != nil {
				failed.Add(1)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				failed.Add(1)
			}
		}
		for range 100 { // warm up: pools, queues, buffers
			cycle()
		}
		// Counted over the whole process: goroutines other tests left
		// running a while add theirs. That noise only adds: the least of
		// five batches is the cycle's.
		allocs := math.Inf(1)
		for range 5 {
			allocs = min(allocs, testing.AllocsPerRun(100, cycle))
		}
		if n := failed.Load(); n != 0 {
			t.Fatalf("%d cycles failed", n)
		}
		return allocs
	}
	allocs := measure()
	t.Logf("TryLock+Unlock: %.2f allocs/op", allocs)
	if allocs > 6 {
		t.Errorf("TryLock+Unlock: %.2f allocs/op, want <= 6 (goal 2)", allocs)
	}
	// The proxy's call: the client's value as the token, and the per-master
	// timeout of the call. The token is the same each cycle (each is
	// unlocked before the next) so that the cycle itself allocates nothing.
	with := measure(engine.WithToken("allocs-token"), engine.WithMasterTimeout(time.Second))
	t.Logf("TryLock+Unlock with WithToken, WithMasterTimeout: %.2f allocs/op", with)
	if with > allocs+0.5 { // (each is the least of five batches: noise only adds)
		t.Errorf("options cost %.2f allocs/op more than none (%.2f), want 0", with-allocs, allocs)
	}
}

func BenchmarkTryLockUnlock(b *testing.B) { benchCycle(b) }

// BenchmarkFencedTryLockUnlock: the fenced acquire script, then the
// write-back round trip, then the release.
func BenchmarkFencedTryLockUnlock(b *testing.B) { benchCycle(b, engine.WithFencing()) }

func BenchmarkTryLockUnlockParallel(b *testing.B) { benchCycleParallel(b) }

func BenchmarkFencedTryLockUnlockParallel(b *testing.B) {
	benchCycleParallel(b, engine.WithFencing())
}

// benchCycle measures TryLock+Unlock of one key, one at a time.
func benchCycle(b *testing.B, opts ...engine.Option) {
	v := newEnv(b, 5, engine.Config{FreshMasters: true})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := v.e.TryLock(ctx, "bench", 10*time.Second, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// benchCycleParallel measures TryLock+Unlock from many goroutines, one key
// each.
func benchCycleParallel(b *testing.B, opts ...engine.Option) {
	v := newEnv(b, 5, engine.Config{FreshMasters: true})
	ctx := context.Background()
	var next atomic.Int64
	var failed atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16) // 16 goroutines per CPU: let the auto-pipelining batch
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := "bench-" + strconv.FormatInt(next.Add(1), 10)
		for pb.Next() {
			l, err := v.e.TryLock(ctx, key, 10*time.Second, opts...)
			if err != nil {
				failed.Add(1)
				continue
			}
			if err := l.Unlock(ctx); err != nil {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	if n := failed.Load(); n != 0 {
		// Per-master timeouts (50ms) on a loaded machine: report, not fail.
		b.ReportMetric(float64(n)/float64(b.N), "failed/op")
	}
}
